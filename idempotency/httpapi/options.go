package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
)

// Defaults of the adapters.
const (
	// DefaultHeader is the request header that carries the idempotency
	// key, as named by the IETF draft and Stripe.
	DefaultHeader = "Idempotency-Key"
	// DefaultExpiry is how long the adapters remember a completed key,
	// unless idempotency.WithExpiry says otherwise: Stripe's 24 hours, what
	// clients of an Idempotency-Key API expect. (The core's own default,
	// idempotency.DefaultExpiry, is Powertools' one hour.)
	DefaultExpiry = 24 * time.Hour
	// DefaultMaxRetryAfter caps the Retry-After of a 409 (see
	// WithMaxRetryAfter).
	DefaultMaxRetryAfter = 2 * time.Second
)

// An Option configures an adapter. Options are checked when the handler is
// wrapped, so that mistakes show at cold start.
type Option func(*config)

type config struct {
	header             string
	methods            []string
	optionalKey        bool
	fingerprintHeaders []string
	scope              ScopeFunc
	storeServerErrors  bool
	returnErrors       bool
	maxRetryAfter      time.Duration
	logger             *slog.Logger
	loggerSet          bool
	guardOpts          []idempotency.Option
	errs               []error
}

func newConfig(opts []Option) (*config, error) {
	c := &config{header: DefaultHeader, methods: []string{"POST", "PATCH"}, maxRetryAfter: DefaultMaxRetryAfter}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("httpapi: nil Option")
		}
		opt(c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c, nil
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("httpapi: "+format, args...))
}

// keyed reports whether requests with method need a key.
func (c *config) keyed(method string) bool {
	return slices.Contains(c.methods, method)
}

// WithHeader sets the request header that carries the idempotency key.
// Default DefaultHeader. It is matched without regard to case.
func WithHeader(name string) Option {
	return func(c *config) {
		if !validHeaderName(name) {
			c.fail("WithHeader(%q): not a valid header name", name)
			return
		}
		c.header = name
	}
}

// WithMethods sets the HTTP methods whose requests need an idempotency key.
// Default POST and PATCH: GET, HEAD, OPTIONS, PUT and DELETE are idempotent
// by definition (RFC 9110), and Stripe ignores keys on them. Requests with
// any other method pass straight through to the handler, unprotected, even
// when they carry a key. Methods are matched without regard to case.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		if len(methods) == 0 {
			c.fail("WithMethods: no methods")
			return
		}
		upper := make([]string, 0, len(methods))
		for _, m := range methods {
			if !isToken(m) {
				c.fail("WithMethods: %q is not a valid method", m)
				return
			}
			upper = append(upper, strings.ToUpper(m))
		}
		c.methods = upper
	}
}

// WithOptionalKey lets requests that need a key but carry none run the
// handler unprotected, as the generic decorator does, instead of being
// answered with ProblemMissingKey (400).
func WithOptionalKey() Option {
	return func(c *config) { c.optionalKey = true }
}

// WithFingerprintHeaders adds request headers to the request fingerprint,
// which by default covers the method, the path and the body: a retry with
// the same key and a different value of one of these headers is answered
// with ProblemKeyReused (422). Names are matched without regard to case; an
// absent header differs from an empty one.
//
// Authorization, Proxy-Authorization and Cookie are refused: credentials
// may change between retries, and nothing derived from them is kept. Scope
// keys by caller with WithScope instead.
func WithFingerprintHeaders(names ...string) Option {
	return func(c *config) {
		for _, name := range names {
			if !validHeaderName(name) {
				c.fail("WithFingerprintHeaders: %q is not a valid header name", name)
				return
			}
			switch lower := strings.ToLower(name); lower {
			case "authorization", "proxy-authorization", "cookie":
				c.fail("WithFingerprintHeaders: %s carries credentials and is never fingerprinted; scope keys by caller with WithScope", name)
				return
			default:
				if !slices.Contains(c.fingerprintHeaders, lower) {
					c.fingerprintHeaders = append(c.fingerprintHeaders, lower)
				}
			}
		}
		slices.Sort(c.fingerprintHeaders)
	}
}

// WithScope sets the function that tells callers apart (see ScopeFunc,
// ScopePrincipal, ScopeClaim and ScopeHeader). The scope becomes part of
// the idempotency key, so requests in different scopes never share a
// record. It is called only for requests that carry a key. Without it, all
// callers share one key space, which is safe only when keys are
// unguessable and callers are trusted not to reuse each other's.
func WithScope(scope ScopeFunc) Option {
	return func(c *config) {
		if scope == nil {
			c.fail("WithScope: nil function")
			return
		}
		c.scope = scope
	}
}

// WithStoreServerErrors stores 5xx responses of the handler and replays
// them, as Stripe does, instead of releasing the key so that a retry runs
// the handler again. Use it when a 5xx can follow a side effect that must
// not be repeated. Responses that say the request did not execute (401,
// 403, 408, 409, 425, 429) are released all the same.
func WithStoreServerErrors() Option {
	return func(c *config) { c.storeServerErrors = true }
}

// WithMaxRetryAfter caps the Retry-After of the 409 that answers a request
// whose key is in use by another request still running. The delay is how
// long the handler usually takes, measured over its recent runs, rounded
// up to whole seconds: at least 1, at most max, and never more than the
// time until the other request's reservation lapses. Default
// DefaultMaxRetryAfter. A client that honours it retries about when the
// other request has finished, not after the longest it could take.
func WithMaxRetryAfter(max time.Duration) Option {
	return func(c *config) {
		if max < time.Second {
			c.fail("WithMaxRetryAfter(%v): Retry-After is in whole seconds; the cap must be at least one second", max)
			return
		}
		c.maxRetryAfter = max
	}
}

// WithReturnErrors makes the adapter return the Go errors of the handler
// (and of the scope function) and let its panics go on, after releasing the
// key, instead of answering 500 with ProblemHandlerFailed. On Lambda, API
// Gateway, Function URLs and ALB answer a function error with 502: use it
// when something around the adapter (a middleware of your own) turns
// errors into responses.
func WithReturnErrors() Option {
	return func(c *config) { c.returnErrors = true }
}

// WithLogger sets the logger for handler errors and panics that the adapter
// answers itself, store failures and unreadable stored responses. It is
// passed to the Guard too (see idempotency.WithLogger), unless
// WithIdempotencyOptions sets another. Default slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.fail("WithLogger: nil logger")
			return
		}
		c.logger, c.loggerSet = logger, true
	}
}

// WithIdempotencyOptions passes options to the Guard that runs the state machine:
// idempotency.WithExpiry, WithKeyPrefix, WithLogger, WithObserver,
// WithClock, WithInProgressTimeout, WithFinalWriteTimeout,
// WithPermanentErrors and WithErrorDecoder. The options that select keys
// and shape typed results (WithKey, WithPayloadValidation, WithRequireKey,
// WithResponseHook) are refused: the adapter derives keys from the
// Idempotency-Key header and fingerprints requests itself.
//
// A classifier given with idempotency.WithPermanentErrors sees the
// handler's Go errors, and also the error with which the adapter releases
// a response that is not stored (see the package documentation): match
// specific errors (errors.Is, errors.As), or such responses are recorded
// as errors (recorded-error) instead of being released.
//
// Without idempotency.WithKeyPrefix, the prefix is
// idempotency.DefaultKeyPrefix of the wrapped handler, as for
// idempotency.Wrap; without idempotency.WithExpiry, the expiry is
// DefaultExpiry (24 hours), not the core's one hour.
func WithIdempotencyOptions(opts ...idempotency.Option) Option {
	return func(c *config) { c.guardOpts = append(c.guardOpts, opts...) }
}

// validHeaderName reports whether name is a valid HTTP field name.
func validHeaderName(name string) bool { return isToken(name) }

// isToken reports whether s is an RFC 9110 token, the syntax of field
// names and methods.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
