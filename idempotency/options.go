package idempotency

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/jmespath"
	"github.com/retrysafe/retrysafe/persistence"
)

// DefaultExpiry is how long a completed key is remembered, as in
// Powertools. See [WithExpiry].
const DefaultExpiry = time.Hour

// Defaults of the options that say them.
const (
	defaultLease             = 30 * time.Second
	defaultFinalWriteTimeout = 5 * time.Second
)

// The kinds of options, by where they apply. Each entry point takes a
// kind of its own. Each option constructor returns a kind that says where
// the option applies, so a misplaced option does not compile. The package
// documentation has the table.
type (
	// A WrapOption configures [Wrap].
	WrapOption interface{ wrapOption() }
	// A GuardOption configures [NewGuard].
	GuardOption interface{ guardOption() }
	// A HandlerOption configures the Lambda handlers of package httpapi
	// (httpapi.WrapAPIGateway and the others).
	HandlerOption interface{ handlerOption() }
	// A MiddlewareOption configures httpapi.Middleware.
	MiddlewareOption interface{ middlewareOption() }
	// A BatchOption configures the batch handlers of package batch.
	BatchOption interface{ batchOption() }
)

// An Option configures every entry point.
type Option interface {
	WrapOption
	GuardOption
	HandlerOption
	MiddlewareOption
	BatchOption
}

// A TransactionOption configures every entry point but
// httpapi.Middleware. The middleware sends the response as the handler
// writes it, before a commit could fail.
type TransactionOption interface {
	WrapOption
	GuardOption
	HandlerOption
	BatchOption
}

// A KeyOption configures the entry points that select keys from typed
// inputs: [Wrap] and the batch handlers.
type KeyOption interface {
	WrapOption
	BatchOption
}

// The option types below each embed the core's Spec of this package's
// settings, which applies the option (core.Apply, the one place every
// option of the library is applied), and have the marker methods of the
// kinds they are, and no other: an option given where it does not apply
// does not compile.

// option applies everywhere: it is an Option.
type option struct{ core.Spec[settings] }

func (option) wrapOption()       {}
func (option) guardOption()      {}
func (option) handlerOption()    {}
func (option) middlewareOption() {}
func (option) batchOption()      {}

// transactionOption is a TransactionOption.
type transactionOption struct{ core.Spec[settings] }

func (transactionOption) wrapOption()    {}
func (transactionOption) guardOption()   {}
func (transactionOption) handlerOption() {}
func (transactionOption) batchOption()   {}

// keyOption is a KeyOption.
type keyOption struct{ core.Spec[settings] }

func (keyOption) wrapOption()  {}
func (keyOption) batchOption() {}

// wrapOnly is a WrapOption only.
type wrapOnly struct{ core.Spec[settings] }

func (wrapOnly) wrapOption() {}

// settings are the values of this package's options, kept in the
// core.Config that options write.
type settings struct {
	expiry            time.Duration
	responseHook      any // func(context.Context, Out, *persistence.Record) Out
	isPermanent       func(error) bool
	decodeError       func(*RecordedError) error
	lease             time.Duration
	wait              time.Duration
	transactions      bool
	hold              bool
	finalWriteTimeout time.Duration
	observers         []Observer
}

// config is the resolved configuration of one Guard.
type config struct {
	settings
	key        *jmespath.Expression
	validation *jmespath.Expression
	requireKey bool
	prefix     string // WithKeyPrefix's
	// acrossTenants is WithoutTenantIsolation's.
	acrossTenants bool
	logger        *slog.Logger
	name          string
	prefix0       string // the entry point's default prefix
}

// newConfig applies opts for the entry point named name, and fills in the
// defaults.
func newConfig[O any](name string, opts []O) (*config, error) {
	c, err := core.Apply(name, opts)
	if err != nil {
		return nil, err
	}
	return configOf(c)
}

// configOf returns the configuration of one Guard that options wrote into
// c, with the entry point's defaults filled in.
func configOf(c *core.Config) (*config, error) {
	cfg := &config{settings: *core.Section[settings](c), key: c.Key, validation: c.Validation, requireKey: c.RequireKey,
		prefix: c.Prefix, acrossTenants: c.AcrossTenants, logger: c.Logger, name: c.Name}
	d := c.Defaults
	if cfg.key == nil && d.Key != "" {
		var err error
		if cfg.key, err = core.CompileKey(d.Key); err != nil {
			return nil, fmt.Errorf("%s: default key: %w", c.Name, err)
		}
	}
	cfg.requireKey = cfg.requireKey || d.RequireKey
	cfg.prefix0 = d.Prefix
	if cfg.expiry == 0 {
		cfg.expiry = cmp.Or(d.Expiry, DefaultExpiry)
	}
	if cfg.finalWriteTimeout == 0 {
		cfg.finalWriteTimeout = defaultFinalWriteTimeout
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	return cfg, nil
}

func init() {
	core.NewGuard = func(store persistence.Store, c *core.Config) (any, error) {
		cfg, err := configOf(c)
		if err != nil {
			return nil, err
		}
		return newGuard(store, cfg, core.DefaultPrefix(nil))
	}
}

// WithKey selects the idempotency key from the input with a JMESPath
// expression, for example "powertools_json(body).order_id" or
// "[customer, order_id]". The Powertools functions and envelopes of
// package [jmespath] are available. By default the whole input is the key.
// The batch handlers default to each record's delivery identity.
//
// The selected value is hashed in canonical form (docs/keys.md). So the
// key does not depend on the order of object members or the spelling of
// numbers. A selection that is null, an empty string, or an array or
// object of only nulls means that the input has no key (see
// [WithRequireKey]).
func WithKey(expression string) KeyOption {
	return keyOption{core.Spec[settings]{Name: "idempotency.WithKey", Set: func(c *core.Config, _ *settings) {
		e, err := core.CompileKey(expression)
		if err != nil {
			c.Fail(fmt.Errorf("idempotency.WithKey: %w", err))
			return
		}
		c.Key = e
	}}}
}

// WithPayloadValidation fingerprints the part of the input that must not
// change between retries with one key. A JMESPath expression selects that
// part ("@" for the whole input). A retry whose fingerprint differs gets a
// [*PayloadMismatchError] instead of the stored result, which belongs to
// another request. Validation is off by default, as in Powertools. Without
// it, when [WithKey] selects a field, any input with that field value gets
// the stored result.
func WithPayloadValidation(expression string) KeyOption {
	return keyOption{core.Spec[settings]{Name: "idempotency.WithPayloadValidation", Set: func(c *core.Config, s *settings) {
		e, err := core.CompileKey(expression)
		if err != nil {
			c.Fail(fmt.Errorf("idempotency.WithPayloadValidation: %w", err))
			return
		}
		c.Validation = e
	}}}
}

// WithRequireKey makes an input without a key fail with [*KeyError]. By
// default, as in Powertools, such an input runs the handler without
// idempotency and logs a warning.
func WithRequireKey() KeyOption {
	return keyOption{core.Spec[settings]{Name: "idempotency.WithRequireKey", Set: func(c *core.Config, _ *settings) { c.RequireKey = true }}}
}

// WithExpiry sets how long a completed key is remembered. A retry after
// that runs the handler again. The default is [DefaultExpiry], one hour.
// For the HTTP adapters it is 24 hours (httpapi.DefaultExpiry). Choose an
// expiry longer than your clients retry for. It must be at least one
// second.
func WithExpiry(d time.Duration) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithExpiry", Set: func(c *core.Config, s *settings) {
		if d < time.Second {
			c.Fail(fmt.Errorf("idempotency.WithExpiry(%v): expiry must be at least one second", d))
			return
		}
		s.expiry = d
	}}}
}

// WithKeyPrefix sets the prefix of every key (prefix + "#" + hash). It
// must not contain "#tenant=", which marks a key's tenant. The default is
// "<function name>.<Go handler name>", with the function name from
// AWS_LAMBDA_FUNCTION_NAME. So two wrapped functions in one Lambda never
// share keys. A [Guard] without the option uses the function name alone,
// or "idempotency". Set the prefix explicitly for closures and methods,
// whose Go names change when code around them changes. Set it also to
// keep keys stable across renames.
func WithKeyPrefix(prefix string) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithKeyPrefix", Set: func(c *core.Config, _ *settings) {
		if prefix == "" {
			c.Fail(fmt.Errorf("idempotency.WithKeyPrefix: empty prefix"))
			return
		}
		if err := core.CheckPrefix(prefix); err != nil {
			c.Fail(fmt.Errorf("idempotency.WithKeyPrefix: %w", err))
			return
		}
		c.Prefix = prefix
	}}}
}

// WithLogger sets the logger for warnings (a call without a key, a fenced
// out write) and errors (a failed completion or release). The adapters log
// with it too. The default is the logger that [slog.Default] returns.
func WithLogger(logger *slog.Logger) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithLogger", Set: func(c *core.Config, _ *settings) {
		if logger == nil {
			c.Fail(fmt.Errorf("idempotency.WithLogger: nil logger"))
			return
		}
		c.Logger = logger
	}}}
}

// WithResponseHook sets a function that adjusts a replayed result before it
// is returned, for example to mark it as a replay (Powertools'
// response_hook). It receives the stored record. Out must be the wrapped
// handler's result type; [Wrap] reports a mismatch.
func WithResponseHook[Out any](hook func(ctx context.Context, out Out, rec *persistence.Record) Out) WrapOption {
	return wrapOnly{core.Spec[settings]{Name: "idempotency.WithResponseHook", Set: func(c *core.Config, s *settings) {
		if hook == nil {
			c.Fail(fmt.Errorf("idempotency.WithResponseHook: nil hook"))
			return
		}
		s.responseHook = hook
	}}}
}

// WithPermanentErrors classifies handler errors. By default a handler error
// releases the key, so a retry runs the handler again. An error for which
// isPermanent returns true is recorded instead. Every retry receives it
// again without running the handler, as a [*RecordedError] (see
// [WithErrorDecoder]). Use the option for failures after the side effect
// started, or that a retry cannot fix (a declined card). Errors wrapped
// with [Permanent] are always recorded.
func WithPermanentErrors(isPermanent func(error) bool) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithPermanentErrors", Set: func(c *core.Config, s *settings) {
		if isPermanent == nil {
			c.Fail(fmt.Errorf("idempotency.WithPermanentErrors: nil function"))
			return
		}
		s.isPermanent = isPermanent
	}}}
}

// WithErrorDecoder turns a recorded error back into an error of your own
// when it is replayed. Without it, retries receive the [*RecordedError].
//
// On Lambda, the decoder can return a messages.InvokeResponse_Error
// (package github.com/aws/aws-lambda-go/lambda/messages). Lambda then
// reports the original errorType to retries too:
//
//	idempotency.WithErrorDecoder(func(se *idempotency.RecordedError) error {
//		return messages.InvokeResponse_Error{Type: se.Type, Message: se.Message}
//	})
func WithErrorDecoder(decode func(*RecordedError) error) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithErrorDecoder", Set: func(c *core.Config, s *settings) {
		if decode == nil {
			c.Fail(fmt.Errorf("idempotency.WithErrorDecoder: nil function"))
			return
		}
		s.decodeError = decode
	}}}
}

// WithLease makes reservations hold their key for d at a time. The lease
// is renewed while the function runs, a third of d before it ends. Each
// renewal is one store request, fenced on the call's token. The lease is
// never renewed past the context's deadline.
//
// On Lambda without the option, a reservation holds its key until the
// invocation's deadline. A crashed invocation of a function with a
// 15-minute timeout then blocks its key for up to 15 minutes. With a
// lease of 10 seconds, it blocks it for at most 10. Without a deadline the
// lease is 30 seconds.
//
// A renewal that fails stops the renewals, and observers see
// [EventRenewed] with its error. The function goes on, and its key lapses
// at the end of the current lease. d must be at least 10 milliseconds.
func WithLease(d time.Duration) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithLease", Set: func(c *core.Config, s *settings) {
		if d < 10*time.Millisecond {
			c.Fail(fmt.Errorf("idempotency.WithLease(%v): a lease must be at least 10ms", d))
			return
		}
		s.lease = d
	}}}
}

// WithTransactions commits the function's own writes in the store's
// database with the completion of its key, atomically. So a side effect
// there happens exactly once. The function either stages its writes or
// writes in the transaction that its context carries:
//
//   - With DynamoDB, a [persistence.Committer], the function stages them
//     with dynamodb.Stage.
//   - With PostgreSQL, a [persistence.TxStore], the function writes in the
//     transaction that postgres.Tx returns.
//
// Wrapping fails with a store that supports neither. A function that fails
// writes nothing. A commit that fails returns a [*CommitError] instead of
// the result.
func WithTransactions() TransactionOption {
	return transactionOption{core.Spec[settings]{Name: "idempotency.WithTransactions", Set: func(_ *core.Config, s *settings) { s.transactions = true }}}
}

// WithHoldUntilReleased holds the key of a call that ends without an
// outcome. That is, it times out, crashes, or its result cannot be stored.
// Its reservation is not taken over when it lapses. Calls with the key
// fail with [*HeldError] until an operator releases it (retrysafe
// release) or the record expires. Use the option for side effects that
// must never repeat without a person deciding. A withdrawal at a third
// party that has no idempotency key is one. The option does the opposite
// of a lease ([WithLease]), which frees the key of a call that ended so
// that a retry runs.
func WithHoldUntilReleased() Option {
	return option{core.Spec[settings]{Name: "idempotency.WithHoldUntilReleased", Set: func(_ *core.Config, s *settings) { s.hold = true }}}
}

// WithWait makes a call that finds its key in progress wait, up to max,
// for the outcome of the call that holds it. Without the option, such a
// call fails at once with [*InProgressError]. The wait ends with one of
// two outcomes:
//
//   - The holder completes. The waiter gets its result, replayed as to a
//     retry.
//   - The holder releases the key, because its function failed. The
//     waiter gets the key itself, and reserves it to run its own function.
//
// A wait never goes past the context's deadline less a margin for the
// waiter's own answer. The margin is a tenth of the time it had left, at
// most a second. When the wait runs out, the call fails with
// [*InProgressError], as without the option. A waiter whose context is
// cancelled returns the context's error.
//
// Waiters in the process of the holder are woken by its outcome, or when
// its reservation lapses, without a store request. Waiters in other
// processes are woken by a store that can ([persistence.Notifier]). They
// poll it every 2 seconds in case a wake-up is lost. Over other stores
// they poll with one conditional write a poll. They back off from 10
// milliseconds to half a second, with jitter. A wait of max costs at most
// about 6 requests, then 8/3 a second (a 10-second wait about 30). A poll
// that fails does not end the wait before max. The option is off by
// default.
func WithWait(max time.Duration) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithWait", Set: func(c *core.Config, s *settings) {
		if max <= 0 {
			c.Fail(fmt.Errorf("idempotency.WithWait(%v): must be positive", max))
			return
		}
		s.wait = max
	}}}
}

// WithFinalWriteTimeout bounds the store write that completes or releases
// a key, and a lease's renewal. The default is 5 seconds. The write runs
// on a context detached from the caller's cancellation, because the
// commonest failure is a deadline that has just passed.
func WithFinalWriteTimeout(d time.Duration) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithFinalWriteTimeout", Set: func(c *core.Config, s *settings) {
		if d <= 0 {
			c.Fail(fmt.Errorf("idempotency.WithFinalWriteTimeout(%v): must be positive", d))
			return
		}
		s.finalWriteTimeout = d
	}}}
}

// WithoutTenantIsolation gives up keeping the records of tenants apart.
// By default, the tenant ID of a Lambda invocation of a function in tenant
// isolation mode is part of its record's key. So one tenant never gets
// another's stored result (docs/keys.md). With the option, calls of all
// tenants with one key share one record. The first tenant's result answers
// the others. Use the option only for work that is the same whoever asks.
func WithoutTenantIsolation() Option {
	return option{core.Spec[settings]{Name: "idempotency.WithoutTenantIsolation", Set: func(c *core.Config, _ *settings) { c.AcrossTenants = true }}}
}

// WithObserver adds an observer, told synchronously of every step of the
// state machine, for metrics, traces and alarms. See [Observer] and
// [Event]. [ObserverFunc] adapts a function. The option may be given more
// than once. Every observer sees every event, in the order the observers
// were given.
func WithObserver(o Observer) Option {
	return option{core.Spec[settings]{Name: "idempotency.WithObserver", Repeatable: true, Set: func(c *core.Config, s *settings) {
		if o == nil {
			c.Fail(fmt.Errorf("idempotency.WithObserver: nil observer"))
			return
		}
		s.observers = append(s.observers, o)
	}}}
}
