package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/internal/httpkey"
	"github.com/retrysafe/retrysafe/persistence"
)

// Defaults of the adapters.
const (
	// DefaultHeader is the request header that carries the idempotency
	// key, Idempotency-Key, as named by the IETF draft and Stripe.
	DefaultHeader = httpkey.Header
	// DefaultExpiry is how long the adapters remember a key, unless
	// idempotency.WithExpiry says otherwise: Stripe's 24 hours, what
	// clients of an Idempotency-Key API expect.
	DefaultExpiry = httpkey.Expiry
)

// Defaults of the knobs, which the options' comments give in words.
const (
	defaultMaxRetryAfter = 2 * time.Second
	defaultMaxBodySize   = 1 << 20
	// defaultMiddlewarePrefix is constant because a net/http handler has
	// no Go name that survives refactoring, and a server's binary name
	// changes between builds.
	defaultMiddlewarePrefix = "http"
)

// An Option configures the Lambda handlers of this package and
// Middleware. Each of its options returns the kind of package
// idempotency's options that says where it applies: Option for both,
// idempotency.MiddlewareOption for those of Middleware only. The
// handlers take idempotency.HandlerOption, Middleware
// idempotency.MiddlewareOption, so that package idempotency's options
// that apply there go with this package's, and no other does.
type Option interface {
	idempotency.HandlerOption
	idempotency.MiddlewareOption
}

// settings are the adapters' own options, kept in the configuration that
// every option writes.
type settings struct {
	header             string
	methods            []string
	optionalKey        bool
	fingerprintHeaders []string
	scope              ScopeFunc
	storeServerErrors  bool
	returnErrors       bool
	maxRetryAfter      time.Duration
	maxBodySize        int64
	// panicsGoOn is Middleware's WithReturnErrors: an http.Handler has no
	// errors to return, and its panics go on after the key is released.
	panicsGoOn bool
}

// option is an option of this package for the handlers and Middleware. It
// embeds the kinds of package idempotency's options it is, nil: their
// marker methods, promoted, make it one, and are never called.
type option struct {
	idempotency.HandlerOption
	idempotency.MiddlewareOption
	core.Spec[settings]
}

// middlewareOption is an option of Middleware only.
type middlewareOption struct {
	idempotency.MiddlewareOption
	core.Spec[settings]
}

// config is the resolved configuration of one adapter.
type config struct {
	settings
	logger *slog.Logger
	prefix string // idempotency.WithKeyPrefix's, for RecordKey
	// acrossTenants is idempotency.WithoutTenantIsolation's, for
	// RecordKey.
	acrossTenants bool
}

// tenant returns the tenant ID that scopes the key of ctx's request, as
// the Guard does.
func (c *config) tenant(ctx context.Context) string {
	if c.acrossTenants {
		return ""
	}
	return core.TenantOf(ctx)
}

// entryKind tells the Lambda adapters from Middleware.
type entryKind int

const (
	lambdaEntry entryKind = iota
	middlewareEntry
)

// newGuard builds the Guard of the adapter named name, of kind kind, from
// opts (the core's and the adapter's own, applied in one pass), with the
// adapter's defaults: prefix when idempotency.WithKeyPrefix is not given,
// and a day's expiry. It returns the adapter's configuration, with its
// defaults filled in.
func newGuard[O any](name string, kind entryKind, store persistence.Store, prefix string, opts []O) (*idempotency.Guard, *config, error) {
	c, err := core.Apply(name, opts)
	if err != nil {
		return nil, nil, err
	}
	c.Defaults = core.Defaults{Prefix: prefix, Expiry: DefaultExpiry}
	cfg, err := resolve(name, kind, c)
	if err != nil {
		return nil, nil, err
	}
	g, err := core.NewGuard(store, c)
	if err != nil {
		return nil, nil, err
	}
	return g.(*idempotency.Guard), cfg, nil
}

// newConfig applies opts for the adapter named name, of kind kind, without
// a Guard.
func newConfig[O any](name string, kind entryKind, opts []O) (*config, error) {
	c, err := core.Apply(name, opts)
	if err != nil {
		return nil, err
	}
	return resolve(name, kind, c)
}

// resolve returns the adapter's configuration in c, with its defaults
// filled in.
func resolve(name string, kind entryKind, c *core.Config) (*config, error) {
	if c.Given("httpapi.WithScope") && c.Given("httpapi.WithRequestScope") {
		return nil, fmt.Errorf("%s: httpapi.WithScope and httpapi.WithRequestScope both set the scope; give one", name)
	}
	cfg := &config{settings: *core.Section[settings](c), logger: c.Logger, prefix: c.Prefix, acrossTenants: c.AcrossTenants}
	if kind == middlewareEntry {
		cfg.panicsGoOn, cfg.returnErrors = cfg.returnErrors, false
		if cfg.maxBodySize == 0 {
			cfg.maxBodySize = defaultMaxBodySize
		}
	}
	if cfg.header == "" {
		cfg.header = DefaultHeader
	}
	if cfg.methods == nil {
		cfg.methods = []string{"POST", "PATCH"}
	}
	if cfg.maxRetryAfter == 0 {
		cfg.maxRetryAfter = defaultMaxRetryAfter
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	return cfg, nil
}

func fail(c *core.Config, format string, args ...any) {
	c.Fail(fmt.Errorf("httpapi."+format, args...))
}

// keyed reports whether requests with method need a key.
func (c *settings) keyed(method string) bool {
	return slices.Contains(c.methods, method)
}

// WithHeader sets the request header that carries the idempotency key.
// Default DefaultHeader. It is matched without regard to case.
func WithHeader(name string) Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithHeader", Set: func(c *core.Config, s *settings) {
		if !httpkey.IsToken(name) {
			fail(c, "WithHeader(%q): not a valid header name", name)
			return
		}
		s.header = name
	}}}
}

// WithMethods sets the HTTP methods whose requests need an idempotency key.
// Default POST and PATCH: GET, HEAD, OPTIONS, PUT and DELETE are idempotent
// by definition (RFC 9110), and Stripe ignores keys on them. Requests with
// any other method pass straight through to the handler, unprotected, even
// when they carry a key. Methods are matched without regard to case.
func WithMethods(methods ...string) Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithMethods", Set: func(c *core.Config, s *settings) {
		if len(methods) == 0 {
			fail(c, "WithMethods: no methods")
			return
		}
		upper := make([]string, 0, len(methods))
		for _, m := range methods {
			if !httpkey.IsToken(m) {
				fail(c, "WithMethods: %q is not a valid method", m)
				return
			}
			upper = append(upper, strings.ToUpper(m))
		}
		s.methods = upper
	}}}
}

// WithOptionalKey lets requests that need a key but carry none run the
// handler unprotected, as the generic decorator does. Without it, they are
// answered with [ProblemMissingKey] (400).
func WithOptionalKey() Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithOptionalKey", Set: func(_ *core.Config, s *settings) { s.optionalKey = true }}}
}

// WithFingerprintHeaders adds request headers to the request fingerprint.
// By default the fingerprint covers the method, the path and the body. A
// retry with the same key and a different value of one of these headers is
// answered with [ProblemKeyReused] (422). Names are matched without regard
// to case. An absent header differs from an empty one.
//
// Authorization, Proxy-Authorization and Cookie are refused. Credentials
// may change between retries, and nothing derived from them is kept. Scope
// keys by caller with [WithScope] instead.
func WithFingerprintHeaders(names ...string) Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithFingerprintHeaders", Repeatable: true, Set: func(c *core.Config, s *settings) {
		for _, name := range names {
			if !httpkey.IsToken(name) {
				fail(c, "WithFingerprintHeaders: %q is not a valid header name", name)
				return
			}
			switch lower := strings.ToLower(name); lower {
			case "authorization", "proxy-authorization", "cookie":
				fail(c, "WithFingerprintHeaders: %s carries credentials and is never fingerprinted; scope keys by caller with WithScope", name)
				return
			default:
				if !slices.Contains(s.fingerprintHeaders, lower) {
					s.fingerprintHeaders = append(s.fingerprintHeaders, lower)
				}
			}
		}
		slices.Sort(s.fingerprintHeaders)
	}}}
}

// WithScope sets the function that tells callers apart (see [ScopeFunc],
// [ScopePrincipal], [ScopeClaim] and [ScopeHeader]). The scope becomes part
// of the idempotency key, so requests in different scopes never share a
// record. It is called only for requests that carry a key. Without it, all
// callers share one key space. That is safe only when keys are unguessable
// and callers are trusted not to reuse each other's.
//
// It applies to [Middleware] too. There the [Request] carries the
// *http.Request as its Event, with the request's context.
// [WithRequestScope] is the simpler form there.
func WithScope(scope ScopeFunc) Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithScope", Set: func(c *core.Config, s *settings) {
		if scope == nil {
			fail(c, "WithScope: nil function")
			return
		}
		s.scope = scope
	}}}
}

// WithRequestScope sets the scope of [Middleware]'s requests, as
// [WithScope] does for the Lambda adapters. The function scope returns who
// is asking. It reads what an authentication middleware in front of
// Middleware put in the request's context. That may be a verified token's
// issuer and subject, or a tenant. When the request does not say, scope
// returns an error that wraps [ErrNoScope]. That is answered 400 with
// [ProblemMissingScope]. Any other error answers 500.
//
// It is called only for requests that carry a key, before the body is
// read. It applies to Middleware only. Give it or WithScope, not both.
func WithRequestScope(scope func(*http.Request) (string, error)) idempotency.MiddlewareOption {
	return middlewareOption{Spec: core.Spec[settings]{Name: "httpapi.WithRequestScope", Set: func(c *core.Config, s *settings) {
		if scope == nil {
			fail(c, "WithRequestScope: nil function")
			return
		}
		s.scope = func(_ context.Context, r *Request) (string, error) {
			return scope(r.Event.(*http.Request)) // Middleware's, the only entry point it applies to
		}

	}}}
}

// WithMaxBodySize sets the largest request body that [Middleware] reads,
// in bytes. The default is 1 MiB, nginx's default limit. That is ample for
// the JSON requests that carry keys.
//
// The body of a request that carries a key is read whole before the
// handler runs, to fingerprint it. The handler gets it unchanged. A larger
// body is answered 413 with [ProblemBodyTooLarge], and the handler does
// not run. Requests that need no key are not read. It applies to
// Middleware only. The Lambda adapters get bodies whole, within Lambda's
// own limit.
func WithMaxBodySize(n int64) idempotency.MiddlewareOption {
	return middlewareOption{Spec: core.Spec[settings]{Name: "httpapi.WithMaxBodySize", Set: func(c *core.Config, s *settings) {
		if n <= 0 {
			fail(c, "WithMaxBodySize(%d): must be positive", n)
			return
		}
		s.maxBodySize = n
	}}}
}

// WithStoreServerErrors stores 5xx responses of the handler and replays
// them, as Stripe does. Without it, the key is released so that a retry
// runs the handler again. Use it when a 5xx can follow a side effect that
// must not be repeated. Responses that say the request did not execute
// (401, 403, 408, 409, 425, 429) are released all the same.
func WithStoreServerErrors() Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithStoreServerErrors", Set: func(_ *core.Config, s *settings) { s.storeServerErrors = true }}}
}

// WithMaxRetryAfter caps the Retry-After of the 409 that answers a request
// whose key is in use by another request still running. The default cap is
// 2 seconds.
//
// The delay is how long the handler usually takes, measured over its
// recent runs. It is rounded up to whole seconds. It is at least 1 and at
// most max. It is never more than the time until the other request's
// reservation lapses. A client that honours it retries about when the
// other request has finished, not after the longest it could take.
func WithMaxRetryAfter(max time.Duration) Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithMaxRetryAfter", Set: func(c *core.Config, s *settings) {
		if max < time.Second {
			fail(c, "WithMaxRetryAfter(%v): Retry-After is in whole seconds; the cap must be at least one second", max)
			return
		}
		s.maxRetryAfter = max
	}}}
}

// WithReturnErrors makes the adapter return the Go errors of the handler
// and of the scope function. It also lets the handler's panics go on. In
// both cases it releases the key first. Without it, the adapter answers
// 500 with [ProblemHandlerFailed].
//
// On Lambda, API Gateway, Function URLs and ALB answer a function error
// with 502. Use it when something around the adapter turns errors into
// responses, such as a middleware of your own.
//
// An http.Handler returns no errors. For [Middleware], it makes the
// handler's panics go on, after the key is released. They go to net/http
// or to a recovery middleware around Middleware. Errors of the scope
// function are answered 500 all the same.
func WithReturnErrors() Option {
	return option{Spec: core.Spec[settings]{Name: "httpapi.WithReturnErrors", Set: func(_ *core.Config, s *settings) { s.returnErrors = true }}}
}
