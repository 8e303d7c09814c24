package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/jmespath"
	"github.com/retrysafe/retrysafe/persistence"
)

// Defaults of the options.
const (
	// DefaultExpiry is how long a completed key is remembered, as in
	// Powertools.
	DefaultExpiry = time.Hour
	// DefaultInProgressTimeout is how long a reservation holds its key when
	// the context has no deadline (outside Lambda): the longest a Lambda
	// invocation can run.
	DefaultInProgressTimeout = 15 * time.Minute
	// DefaultFinalWriteTimeout bounds the write that completes or releases a
	// key. It runs on a context detached from the caller's cancellation,
	// because the commonest failure is a deadline that has just passed.
	DefaultFinalWriteTimeout = 5 * time.Second
)

// An Option configures Wrap and NewGuard. Options are checked when the
// handler is wrapped, so that a bad expression fails at cold start, not on
// the first request.
type Option func(*config)

type config struct {
	keyExpr           *jmespath.Expression
	validationExpr    *jmespath.Expression
	requireKey        bool
	expiry            time.Duration
	prefix            string
	logger            *slog.Logger
	responseHook      any
	isPermanent       func(error) bool
	decodeError       func(*StoredError) error
	inProgressTimeout time.Duration
	finalWriteTimeout time.Duration
	observer          func(context.Context, Event)
	now               func() time.Time // nil: time.Now
	errs              []error
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		expiry:            DefaultExpiry,
		inProgressTimeout: DefaultInProgressTimeout,
		finalWriteTimeout: DefaultFinalWriteTimeout,
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("idempotency: nil Option")
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
	c.errs = append(c.errs, fmt.Errorf("idempotency: "+format, args...))
}

// compileKeyExpression compiles an expression used to derive a key or a
// payload hash, which must give one result for one input.
func (c *config) compileKeyExpression(option, expr string) *jmespath.Expression {
	e, err := jmespath.Compile(expr)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("idempotency: %s: %w", option, err))
		return nil
	}
	if e.OrderDependent() {
		c.fail("%s: expression %q depends on the order of object members (a value projection such as headers.*, or keys(), values(), items()), which Go maps do not keep; select members by name", option, expr)
		return nil
	}
	return e
}

// WithKey selects the idempotency key from the input with a JMESPath
// expression, for example "powertools_json(body).order_id" or
// "[customer, order_id]". The Powertools functions and envelopes of package
// jmespath are available. By default the whole input is the key.
//
// The selected value is hashed in canonical form, so the key does not depend
// on the order of object members or the spelling of numbers. A selection
// that is null, an empty string, or an array or object of only nulls means
// the input has no key: see WithRequireKey.
func WithKey(expression string) Option {
	return func(c *config) { c.keyExpr = c.compileKeyExpression("WithKey", expression) }
}

// WithPayloadValidation fingerprints the part of the input that must not
// change between retries with one key, selected with a JMESPath expression
// ("@" for the whole input). A retry whose fingerprint differs gets a
// *PayloadMismatchError instead of the stored result, which belongs to
// another request. Off by default (as in Powertools): with WithKey
// selecting a field, any input with that field value gets the stored result.
func WithPayloadValidation(expression string) Option {
	return func(c *config) {
		c.validationExpr = c.compileKeyExpression("WithPayloadValidation", expression)
	}
}

// WithRequireKey makes an input without a key fail with *KeyError. By
// default, as in Powertools, such an input runs the handler without
// idempotency and logs a warning.
func WithRequireKey() Option {
	return func(c *config) { c.requireKey = true }
}

// WithExpiry sets how long a completed key is remembered: a retry after
// that runs the handler again. Default DefaultExpiry (one hour). Choose it
// longer than your clients retry for.
func WithExpiry(d time.Duration) Option {
	return func(c *config) {
		if d < time.Second {
			c.fail("WithExpiry(%v): expiry must be at least one second", d)
		}
		c.expiry = d
	}
}

// WithKeyPrefix sets the prefix of every key (prefix + "#" + hash). The
// default is "<function name>.<Go handler name>", with the function name
// from AWS_LAMBDA_FUNCTION_NAME, so that two wrapped functions in one Lambda
// never share keys; see DefaultKeyPrefix. Set it explicitly for closures
// and methods, whose Go names change when code around them changes, and to
// keep keys stable across renames.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) {
		if prefix == "" {
			c.fail("WithKeyPrefix: empty prefix")
		}
		c.prefix = prefix
	}
}

// WithLogger sets the logger for warnings (a call without a key, a fenced
// out write) and errors (a failed completion or release). Default
// slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.fail("WithLogger: nil logger")
		}
		c.logger = logger
	}
}

// WithResponseHook sets a function that adjusts a replayed result before it
// is returned, for example to mark it as a replay (Powertools'
// response_hook). It receives the stored record. Out must be the wrapped
// handler's result type; Wrap reports a mismatch.
func WithResponseHook[Out any](hook func(ctx context.Context, out Out, rec *persistence.Record) Out) Option {
	return func(c *config) {
		if hook == nil {
			c.fail("WithResponseHook: nil hook")
		}
		c.responseHook = hook
	}
}

// WithPermanentErrors classifies handler errors. By default a handler error
// releases the key, so a retry runs the handler again. An error for which
// isPermanent returns true is recorded instead, and every retry receives it
// again (as a *StoredError, see WithErrorDecoder) without running the
// handler: use it for failures after the side effect started, or that a
// retry cannot fix (a declined card). Errors wrapped with Permanent are
// always recorded.
func WithPermanentErrors(isPermanent func(error) bool) Option {
	return func(c *config) {
		if isPermanent == nil {
			c.fail("WithPermanentErrors: nil function")
		}
		c.isPermanent = isPermanent
	}
}

// WithErrorDecoder turns a recorded error back into an error of your own
// when it is replayed. Without it, retries receive the *StoredError.
//
// On Lambda, returning messages.InvokeResponse_Error{Type: se.Type,
// Message: se.Message} (package github.com/aws/aws-lambda-go/lambda/messages)
// makes Lambda report the original errorType to retries too.
func WithErrorDecoder(decode func(*StoredError) error) Option {
	return func(c *config) {
		if decode == nil {
			c.fail("WithErrorDecoder: nil function")
		}
		c.decodeError = decode
	}
}

// WithInProgressTimeout sets how long a reservation holds its key when the
// context has no deadline. On Lambda the context's deadline, the
// invocation's, is used instead: a crashed invocation's key becomes usable
// again at its deadline. Default DefaultInProgressTimeout.
func WithInProgressTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithInProgressTimeout(%v): must be positive", d)
		}
		c.inProgressTimeout = d
	}
}

// WithFinalWriteTimeout bounds the store write that completes or releases a
// key. Default DefaultFinalWriteTimeout.
func WithFinalWriteTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithFinalWriteTimeout(%v): must be positive", d)
		}
		c.finalWriteTimeout = d
	}
}

// WithObserver sets a function called at every step of the state machine,
// synchronously, for metrics and alarms. It must be fast and must not
// panic.
func WithObserver(observe func(ctx context.Context, e Event)) Option {
	return func(c *config) {
		if observe == nil {
			c.fail("WithObserver: nil function")
		}
		c.observer = observe
	}
}

// WithClock sets the clock used for expiry decisions. Default time.Now.
// It exists for tests and for simulating clock skew between execution
// environments.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.fail("WithClock: nil function")
		}
		c.now = now
	}
}
