// Package core holds what the packages of the library share below their
// public APIs: the configuration that idempotency's options and those of
// the adapters (idempotency/httpapi, idempotency/batch) write into, the
// default key prefix and the switch of POWERTOOLS_IDEMPOTENCY_DISABLED,
// and the derivation of keys from inputs, which the retrysafe command uses
// too.
//
// One option type, idempotency.Option (a func(*Config)), serves every
// entry point, so that the adapters take the core's options directly. Each
// option says which entry points it applies to; Apply refuses an option
// given where it does not apply, or given twice.
package core

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/jmespath"
)

// Entry is a set of entry points: the functions that take options.
type Entry uint8

// The entry points.
const (
	// Wrap is idempotency.Wrap.
	Wrap Entry = 1 << iota
	// Guard is idempotency.NewGuard.
	Guard
	// HTTP is the adapters of package httpapi.
	HTTP
	// Batch is the handlers of package batch.
	Batch

	// All is every entry point.
	All = Wrap | Guard | HTTP | Batch
)

// Config is what the options of one call of an entry point set.
type Config struct {
	// Entry is the entry point the options are given to, and Name its
	// name, which starts its messages ("httpapi: WrapAPIGateway").
	Entry Entry
	Name  string

	// Logger is WithLogger's, or nil; every entry point logs.
	Logger *slog.Logger
	// Key is WithKey's expression, or nil; the batch handlers read it to
	// keep records with one key in one lane.
	Key *jmespath.Expression
	// Prefix is WithKeyPrefix's prefix, or ""; httpapi.RecordKey reads
	// it, to derive the keys its adapters derive.
	Prefix string

	// Defaults are the entry point's own defaults, for what no option
	// sets: an adapter passes its own (see As), so that a caller's option
	// never conflicts with them.
	Defaults Defaults

	sections map[any]any
	given    []given
	errs     []error
}

type given struct {
	name       string
	where      Entry
	repeatable bool
}

// Defaults are an entry point's defaults that differ from the core's.
type Defaults struct {
	// Prefix is the key prefix without WithKeyPrefix: the default prefix
	// of the function the caller gave the adapter.
	Prefix string
	// Expiry is the expiry without WithExpiry, when not zero.
	Expiry time.Duration
	// Key is the key expression without WithKey, when not empty.
	Key string
	// RequireKey makes inputs without a key fail, as WithRequireKey does.
	RequireKey bool
}

// Apply returns the Config that opts write, for the entry point entry,
// named name. It fails if an option is nil or invalid, is given twice, or
// does not apply to the entry point (which an adapter's As may change).
func Apply(entry Entry, name string, opts []func(*Config)) (*Config, error) {
	c := &Config{Entry: entry, Name: name}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%s: nil Option", name)
		}
		opt(c)
	}
	seen := make(map[string]bool, len(c.given))
	for _, g := range c.given {
		switch {
		case seen[g.name] && !g.repeatable:
			c.errs = append(c.errs, fmt.Errorf("%s given twice; give it once", g.name))
		case c.Entry&g.where == 0:
			c.errs = append(c.errs, fmt.Errorf("%s does not apply here: it applies to %s", g.name, g.where))
		}
		seen[g.name] = true
	}
	errs := make([]error, len(c.errs))
	for i, err := range c.errs {
		errs[i] = fmt.Errorf("%s: %w", c.Name, err)
	}
	return c, errors.Join(errs...)
}

// Funcs returns opts as the functions Apply takes: an Option type of a
// package is a func(*Config).
func Funcs[O ~func(*Config)](opts []O) []func(*Config) {
	fns := make([]func(*Config), len(opts))
	for i, o := range opts {
		fns[i] = o
	}
	return fns
}

// As returns the option with which an adapter built on idempotency.Wrap or
// NewGuard names itself: the options are then checked against entry, and
// its defaults apply.
func As(entry Entry, name string, defaults Defaults) func(*Config) {
	return func(c *Config) { c.Entry, c.Name, c.Defaults = entry, name, defaults }
}

// Use records that the option named name (qualified: "idempotency.WithExpiry")
// was given, and the entry points it applies to. Only options that add to
// a list (repeatable) may be given more than once.
func (c *Config) Use(name string, where Entry, repeatable bool) {
	c.given = append(c.given, given{name, where, repeatable})
}

// Given reports whether the option named name was given.
func (c *Config) Given(name string) bool {
	for _, g := range c.given {
		if g.name == name {
			return true
		}
	}
	return false
}

// Fail records that an option is invalid; Apply reports it, after the
// entry point's name. err's message starts with the option's qualified
// name: "idempotency.WithExpiry(0s): ...".
func (c *Config) Fail(err error) { c.errs = append(c.errs, err) }

// Section returns the settings of type T that a package keeps in c under
// key (a type of its own), made on first use.
func Section[T any](c *Config, key any) *T {
	if c.sections == nil {
		c.sections = make(map[any]any)
	}
	s, ok := c.sections[key].(*T)
	if !ok {
		s = new(T)
		c.sections[key] = s
	}
	return s
}

// String names the entry points in e, for messages.
func (e Entry) String() string {
	var names []string
	for _, n := range []struct {
		e    Entry
		name string
	}{{Wrap, "idempotency.Wrap"}, {Guard, "idempotency.NewGuard"}, {HTTP, "the httpapi adapters"}, {Batch, "the batch handlers"}} {
		if e&n.e != 0 {
			names = append(names, n.name)
		}
	}
	switch len(names) {
	case 0:
		return "nothing"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
