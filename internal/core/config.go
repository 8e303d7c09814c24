// Package core holds what the packages of the library share below their
// public APIs: the configuration that every option writes into, the
// default key prefix and the switch of POWERTOOLS_IDEMPOTENCY_DISABLED,
// the mark of idempotency.Permanent, and the derivation of keys from
// inputs, which the retrysafe command uses too.
//
// Options are values of types that say where they apply (see package
// idempotency's documentation). Every option value of the library is a
// Spec of its package's settings, inside such a type, and writes a Config
// through Option: Apply applies the options of one entry point, the
// core's and an adapter's together, in one pass, and refuses an option
// given twice. An adapter builds its Guard from the Config (NewGuard).
package core

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/jmespath"
	"github.com/retrysafe/retrysafe/persistence"
)

// An Option is what every option value of the library is: it writes its
// setting into a Config. The option types of the public packages (their
// kinds of where an option applies) are implemented by unexported types
// that implement Option too.
type Option interface {
	Configure(*Config)
}

// Config is what the options of one call of an entry point set.
type Config struct {
	// Name is the entry point's name, which starts its messages
	// ("httpapi: WrapAPIGateway").
	Name string

	// Logger is WithLogger's, or nil; every entry point logs.
	Logger *slog.Logger
	// Key is WithKey's expression, or nil, Validation
	// WithPayloadValidation's, and RequireKey WithRequireKey's: what
	// idempotency.Wrap and the batch handlers derive keys with.
	Key        *jmespath.Expression
	Validation *jmespath.Expression
	RequireKey bool
	// Prefix is WithKeyPrefix's prefix, or "".
	Prefix string
	// AcrossTenants is WithoutTenantIsolation's: keys without the tenant
	// of the invocation.
	AcrossTenants bool

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

// ErrForeignOption is the error of an option value that this module did
// not make.
var ErrForeignOption = errors.New("an option value that this module did not make")

// Apply returns the Config that opts write, for the entry point named
// name. Each of opts must be an Option, and nil ones are refused. It fails
// if an option is invalid, or given twice.
func Apply[O any](name string, opts []O) (*Config, error) {
	c := &Config{Name: name}
	for _, opt := range opts {
		o, ok := any(opt).(Option)
		switch {
		case any(opt) == nil:
			return nil, fmt.Errorf("%s: nil option", name)
		case !ok:
			return nil, fmt.Errorf("%s: %T: %w", name, opt, ErrForeignOption)
		}
		o.Configure(c)
	}
	seen := make(map[string]bool, len(c.given))
	for _, g := range c.given {
		if seen[g.name] && !g.repeatable {
			c.errs = append(c.errs, fmt.Errorf("%s given twice; give it once", g.name))
		}
		seen[g.name] = true
	}
	errs := make([]error, len(c.errs))
	for i, err := range c.errs {
		errs[i] = fmt.Errorf("%s: %w", c.Name, err)
	}
	return c, errors.Join(errs...)
}

// Use records that the option named name (qualified: "idempotency.WithExpiry")
// was given. Only options that add to a list (repeatable) may be given
// more than once.
func (c *Config) Use(name string, repeatable bool) {
	c.given = append(c.given, given{name, repeatable})
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

// Section returns the settings of type S that a package keeps in c,
// made on first use.
func Section[S any](c *Config) *S {
	if c.sections == nil {
		c.sections = make(map[any]any)
	}
	key := (*S)(nil) // one key per type
	s, ok := c.sections[key].(*S)
	if !ok {
		s = new(S)
		c.sections[key] = s
	}
	return s
}

// A Spec is an option that sets its package's settings S: every option
// value of the library is one, inside a type that says where it applies.
type Spec[S any] struct {
	// Name is the option's qualified name: "httpapi.WithHeader".
	Name string
	// Repeatable options add to a list, and may be given more than once.
	Repeatable bool
	// Set writes the option into c, and its settings s.
	Set func(c *Config, s *S)
}

// Configure implements Option.
func (o Spec[S]) Configure(c *Config) {
	c.Use(o.Name, o.Repeatable)
	o.Set(c, Section[S](c))
}

// NewGuard returns package idempotency's Guard (an *idempotency.Guard)
// over store, with the settings that options wrote into c: the adapters
// apply their options and the core's in one pass (Apply), and build their
// Guard from the result. Package idempotency sets it.
var NewGuard func(store persistence.Store, c *Config) (any, error)
