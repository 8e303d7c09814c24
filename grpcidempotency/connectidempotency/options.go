package connectidempotency

import (
	"context"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
	"github.com/retrysafe/retrysafe/idempotency"
)

// Defaults and names of the interceptors.
const (
	// DefaultKeyField is the request field that carries the key, as
	// AIP-155 names it.
	DefaultKeyField = "request_id"
	// DefaultMetadataKey is the request header (gRPC metadata) that carries
	// the key when the request message has no key field.
	DefaultMetadataKey = "idempotency-key"
	// MetadataReplayed is the response header that marks a replay: its
	// value is "true". In a replayed error, it is in the error's metadata.
	MetadataReplayed = "idempotent-replayed"
	// MaxKeyLength is the longest key accepted, in characters. AIP-155's
	// UUIDs have 36.
	MaxKeyLength = 255
	// DefaultMaxRetryDelay caps the retry delay of ABORTED (see
	// WithMaxRetryDelay).
	DefaultMaxRetryDelay = 2 * time.Second
	// ErrorDomain is the domain of the google.rpc.ErrorInfo in the
	// interceptor's own answers.
	ErrorDomain = "github.com/retrysafe/retrysafe"
)

// The reasons of the google.rpc.ErrorInfo in the interceptor's own
// answers. They are stable: clients may match on them.
const (
	// ReasonMissingKey (INVALID_ARGUMENT): the method requires a key and
	// the call has none.
	ReasonMissingKey = "MISSING_KEY"
	// ReasonInvalidKey (INVALID_ARGUMENT): the key is empty in the
	// metadata, longer than MaxKeyLength, not UTF-8, has control
	// characters, or the metadata carries several different keys.
	ReasonInvalidKey = "INVALID_KEY"
	// ReasonMissingScope (UNAUTHENTICATED): the scope function found no
	// caller (ErrNoScope).
	ReasonMissingScope = "MISSING_SCOPE"
	// ReasonScopeFailed (INTERNAL): the scope function failed.
	ReasonScopeFailed = "SCOPE_FAILED"
	// ReasonKeyInUse (ABORTED, with a google.rpc.RetryInfo): a call with
	// the key is still running.
	ReasonKeyInUse = "KEY_IN_USE"
	// ReasonKeyHeld (FAILED_PRECONDITION): the call that reserved the key
	// ended without an outcome, and the key is held until an operator
	// releases it (idempotency.WithHoldUntilReleased). Not stored; no
	// retry helps until the release.
	ReasonKeyHeld = "KEY_HELD"
	// ReasonKeyReused (INVALID_ARGUMENT): the key was used before for
	// another request.
	ReasonKeyReused = "KEY_REUSED"
	// ReasonStoreUnavailable (UNAVAILABLE, with a google.rpc.RetryInfo):
	// the store failed before the handler ran; nothing happened.
	ReasonStoreUnavailable = "STORE_UNAVAILABLE"
	// ReasonNotCommitted (UNAVAILABLE with a google.rpc.RetryInfo, or
	// INTERNAL when the store has no transactions): the handler's writes
	// were not committed with its result (idempotency.WithTransactions).
	ReasonNotCommitted = "NOT_COMMITTED"
	// ReasonRecordedError (INTERNAL): an earlier call with the key failed
	// with an error recorded as permanent, without a status.
	ReasonRecordedError = "RECORDED_ERROR"
	// ReasonResponseNotStored (INTERNAL): an earlier call with the key
	// completed, but its response was too large for the store.
	ReasonResponseNotStored = "RESPONSE_NOT_STORED"
	// ReasonReplayFailed (INTERNAL): the stored response cannot be read.
	ReasonReplayFailed = "REPLAY_FAILED"
	// ReasonFingerprintFailed (INTERNAL): the request could not be
	// encoded.
	ReasonFingerprintFailed = "FINGERPRINT_FAILED"
)

// ErrNoScope is matched (with errors.Is) by the errors of scope functions
// that find nothing identifying the caller. The interceptor answers such
// calls UNAUTHENTICATED and does not run the handler. Custom scope
// functions should wrap it for the same answer. An error with a status is
// answered with it; any other error is INTERNAL.
var ErrNoScope = engine.ErrNoScope

// A KeySource says where a method's key is read, and which source wins
// when a call carries both. The other is then ignored.
type KeySource int

const (
	// FieldFirst reads the key field, and the metadata when the field is
	// empty or absent. It is the default.
	FieldFirst KeySource = iota
	// MetadataFirst reads the metadata, and the key field when the
	// metadata has no key.
	MetadataFirst
	// FieldOnly reads the key field only.
	FieldOnly
	// MetadataOnly reads the metadata only.
	MetadataOnly
)

// Policy is what the server interceptor does with the calls of a method.
// The zero value reads the key field, then the metadata, and runs calls
// without a key unprotected, since AIP-155 makes request IDs optional.
type Policy struct {
	// Keys says where the key is read. Default FieldFirst.
	Keys KeySource
	// RequireKey answers calls without a key INVALID_ARGUMENT
	// (ReasonMissingKey), without running the handler.
	RequireKey bool
	// Skip runs the method's calls unprotected, with or without a key.
	Skip bool
}

func (p Policy) engine() engine.Policy {
	return engine.Policy{Keys: engine.KeySource(p.Keys), RequireKey: p.RequireKey, Skip: p.Skip}
}

// RetryPolicy is the budget of the client interceptor's retries. Zero
// fields take their defaults.
type RetryPolicy struct {
	// MaxAttempts is how many times a call is sent at most, the first time
	// included. Default DefaultMaxAttempts; 1 never retries.
	MaxAttempts int
	// MaxElapsed is how long after the first attempt the last may start.
	// Default DefaultMaxElapsed, or half the KeyWindow if that is shorter.
	// It must be at most half the KeyWindow.
	MaxElapsed time.Duration
	// KeyWindow is how long the server remembers a key. Default
	// idempotency.DefaultExpiry, the server interceptor's default.
	KeyWindow time.Duration
	// BaseDelay is the backoff before the first retry, doubled for each
	// retry after it. Default DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxDelay caps the backoff. Default DefaultMaxDelay. It does not cap
	// a RetryInfo's delay: an answer that asks for more time than the
	// budget has left is final.
	MaxDelay time.Duration
}

// Defaults of RetryPolicy.
const (
	DefaultMaxAttempts = 5
	DefaultMaxElapsed  = time.Minute
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
)

// A ServerOption configures NewServerInterceptor.
type ServerOption interface{ applyServer(*serverSettings) }

// A ClientOption configures NewClientInterceptor.
type ClientOption interface{ applyClient(*clientSettings) }

// An Option configures both interceptors.
type Option interface {
	ServerOption
	ClientOption
}

type serverSettings struct {
	o     *engine.Options
	cfg   engine.Config
	scope func(context.Context, connect.AnyRequest) (string, error)
}

type clientSettings struct {
	o   *engine.Options
	cfg engine.ClientConfig
}

type serverOption func(*serverSettings)

func (f serverOption) applyServer(s *serverSettings) { f(s) }

type clientOption func(*clientSettings)

func (f clientOption) applyClient(s *clientSettings) { f(s) }

// option applies to both interceptors: each reads the key's place.
type option struct {
	name  string
	check func(o *engine.Options) bool
	field protoreflect.Name
	md    string
}

func (o option) applyServer(s *serverSettings) {
	s.o.Use(o.name, false)
	if o.check(s.o) {
		s.cfg.KeyField = cmpName(o.field, s.cfg.KeyField)
		s.cfg.MetadataKey = cmpString(o.md, s.cfg.MetadataKey)
	}
}

func (o option) applyClient(s *clientSettings) {
	s.o.Use(o.name, false)
	if o.check(s.o) {
		s.cfg.KeyField = cmpName(o.field, s.cfg.KeyField)
		s.cfg.MetadataKey = cmpString(o.md, s.cfg.MetadataKey)
	}
}

func cmpName(a, b protoreflect.Name) protoreflect.Name {
	if a != "" {
		return a
	}
	return b
}

func cmpString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// WithKeyField sets the name of the request field that carries the key:
// a singular string field. Default DefaultKeyField. Requests without such
// a field read the metadata.
func WithKeyField(name string) Option {
	return option{name: "WithKeyField", field: protoreflect.Name(name), check: func(o *engine.Options) bool {
		if !engine.ValidField(name) {
			o.Fail("connectidempotency.WithKeyField(%q): not a valid field name", name)
			return false
		}
		return true
	}}
}

// WithMetadataKey sets the metadata key that carries the key. Default
// DefaultMetadataKey. It must be lower case, and not a binary ("-bin") or
// reserved ("grpc-") key.
func WithMetadataKey(key string) Option {
	return option{name: "WithMetadataKey", md: key, check: func(o *engine.Options) bool {
		if !engine.ValidMetadataKey(key) {
			o.Fail("connectidempotency.WithMetadataKey(%q): not a valid metadata key (lower case, not -bin, not grpc-)", key)
			return false
		}
		return true
	}}
}

// WithKeyFunc sets the function that reads the key from a request message
// in place of the key field: for a key in a nested message (AEP-155's
// idempotency_key.key, say). An empty string means no key. It may not be
// given with WithKeyField.
func WithKeyFunc(key func(req proto.Message) string) ServerOption {
	return serverOption(func(s *serverSettings) {
		s.o.Use("WithKeyFunc", false)
		if key == nil {
			s.o.Fail("connectidempotency.WithKeyFunc: nil function")
			return
		}
		s.cfg.KeyFunc = key
	})
}

// WithGuardOptions passes options of package idempotency to the Guard
// that the interceptor runs calls on: idempotency.WithKeyPrefix,
// WithExpiry, WithWait, WithLease, WithObserver, WithTransactions and
// the others of kind idempotency.GuardOption. It may be given more than
// once.
func WithGuardOptions(opts ...idempotency.GuardOption) ServerOption {
	return serverOption(func(s *serverSettings) {
		s.o.Use("WithGuardOptions", true)
		s.cfg.GuardOptions = append(s.cfg.GuardOptions, opts...)
	})
}

// WithPolicy sets the policy of the methods that WithMethodPolicy does
// not name. Default the zero Policy.
func WithPolicy(p Policy) ServerOption {
	return serverOption(func(s *serverSettings) {
		s.o.Use("WithPolicy", false)
		if err := engine.CheckPolicy(p.engine()); err != nil {
			s.o.Fail("connectidempotency.WithPolicy: %v", err)
			return
		}
		s.cfg.Default = p.engine()
	})
}

// WithMethodPolicy sets the policy of one method, named in full
// ("/orders.v1.Orders/CreateOrder", connect.Spec's Procedure).
// It may be given once for each method.
func WithMethodPolicy(fullMethod string, p Policy) ServerOption {
	return serverOption(func(s *serverSettings) {
		s.o.Use("WithMethodPolicy", true)
		switch err := engine.CheckPolicy(p.engine()); {
		case !engine.ValidMethod(fullMethod):
			s.o.Fail("connectidempotency.WithMethodPolicy(%q): not a full method name, /package.Service/Method", fullMethod)
		case err != nil:
			s.o.Fail("connectidempotency.WithMethodPolicy(%q): %v", fullMethod, err)
		case s.cfg.Methods[fullMethod] != nil:
			s.o.Fail("connectidempotency.WithMethodPolicy(%q) given twice; give it once", fullMethod)
		default:
			if s.cfg.Methods == nil {
				s.cfg.Methods = map[string]*engine.Policy{}
			}
			ep := p.engine()
			s.cfg.Methods[fullMethod] = &ep
		}
	})
}

// WithScope sets the function that tells callers apart: it returns who
// is calling, from what the server authenticated (claims that an
// authentication middleware or interceptor before this one put in the
// context, as connectrpc.com/authn does), or an error that wraps
// ErrNoScope. The
// scope is part of the record's key, so callers in different scopes never
// share a record. It is called only for calls with a key. Without it, all
// callers share one key space, which is safe only when keys are
// unguessable and callers are trusted not to reuse each other's.
func WithScope(scope func(ctx context.Context, req connect.AnyRequest) (string, error)) ServerOption {
	return serverOption(func(s *serverSettings) {
		s.o.Use("WithScope", false)
		if scope == nil {
			s.o.Fail("connectidempotency.WithScope: nil function")
			return
		}
		s.scope = scope
	})
}

// WithStoreServerErrors stores and replays results with the codes
// INTERNAL, UNKNOWN and DATA_LOSS, as Stripe stores 5xx responses, instead
// of releasing the key so that a retry runs the handler again. Use it when
// such an error can follow a side effect that must not be repeated. The
// codes that say the call did not execute are released all the same.
func WithStoreServerErrors() ServerOption {
	return serverOption(func(s *serverSettings) {
		s.o.Use("WithStoreServerErrors", false)
		s.cfg.StoreServerErrors = true
	})
}

// WithMaxRetryDelay caps the delay of the google.rpc.RetryInfo of ABORTED,
// the answer to a call whose key is held by another call still running.
// The delay is how long the handler usually takes, measured over its
// recent runs: at least 10 milliseconds, at most max, and never more than
// the time until the other call's reservation lapses. Default
// DefaultMaxRetryDelay.
func WithMaxRetryDelay(max time.Duration) ServerOption {
	return serverOption(func(s *serverSettings) {
		s.o.Use("WithMaxRetryDelay", false)
		if max < 10*time.Millisecond {
			s.o.Fail("connectidempotency.WithMaxRetryDelay(%v): must be at least 10ms", max)
			return
		}
		s.cfg.MaxRetryDelay = max
	})
}

// WithRetry sets the client's budget of retries. Default the zero
// RetryPolicy, with its defaults.
func WithRetry(p RetryPolicy) ClientOption {
	return clientOption(func(s *clientSettings) {
		s.o.Use("WithRetry", false)
		s.cfg.Retry = engine.RetryPolicy(p)
	})
}

// WithKeyedMethods names methods whose calls get a key in the metadata
// when their request message has no key field, by full name
// ("/orders.v1.Orders/CreateOrder"). Calls of other methods without a key
// field pass through, once, unless the caller gives them a key
// (ContextWithKey). It may be given more than once.
func WithKeyedMethods(fullMethods ...string) ClientOption {
	return clientOption(func(s *clientSettings) {
		s.o.Use("WithKeyedMethods", true)
		for _, m := range fullMethods {
			if !engine.ValidMethod(m) {
				s.o.Fail("connectidempotency.WithKeyedMethods: %q is not a full method name, /package.Service/Method", m)
				continue
			}
			if s.cfg.Methods == nil {
				s.cfg.Methods = map[string]bool{}
			}
			s.cfg.Methods[m] = true
		}
	})
}

// newServerSettings applies opts for the entry point named name.
func newServerSettings(name string, opts []ServerOption) (*serverSettings, error) {
	s := &serverSettings{o: engine.NewOptions(name), cfg: engine.Config{
		KeyField:      DefaultKeyField,
		MetadataKey:   DefaultMetadataKey,
		MaxRetryDelay: DefaultMaxRetryDelay,
	}}
	for _, opt := range opts {
		if opt == nil {
			s.o.Fail("nil option")
			continue
		}
		opt.applyServer(s)
	}
	if s.o.Given("WithKeyField") && s.o.Given("WithKeyFunc") {
		s.o.Fail("WithKeyField and WithKeyFunc both say where the key is; give one")
	}
	return s, s.o.Err()
}

// newClientSettings applies opts for the entry point named name.
func newClientSettings(name string, opts []ClientOption) (*clientSettings, error) {
	s := &clientSettings{o: engine.NewOptions(name), cfg: engine.ClientConfig{
		KeyField:    DefaultKeyField,
		MetadataKey: DefaultMetadataKey,
	}}
	for _, opt := range opts {
		if opt == nil {
			s.o.Fail("nil option")
			continue
		}
		opt.applyClient(s)
	}
	retry, err := s.cfg.Retry.Resolve()
	if err != nil {
		s.o.Fail("connectidempotency.WithRetry: %v", err)
	}
	s.cfg.Retry = retry
	return s, s.o.Err()
}

// String returns the name of s.
func (s KeySource) String() string {
	switch s {
	case FieldFirst:
		return "FieldFirst"
	case MetadataFirst:
		return "MetadataFirst"
	case FieldOnly:
		return "FieldOnly"
	case MetadataOnly:
		return "MetadataOnly"
	}
	return "KeySource(" + strconv.Itoa(int(s)) + ")"
}
