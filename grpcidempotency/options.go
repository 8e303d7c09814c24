package grpcidempotency

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
	"github.com/retrysafe/retrysafe/idempotency"
)

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

// Policy is what the server interceptors do with the calls of a method.
// The zero value reads the key field, then the metadata, and runs calls
// without a key unprotected, since AIP-155 makes request IDs optional.
type Policy struct {
	// Keys says where the key is read. Default [FieldFirst].
	Keys KeySource
	// RequireKey answers calls without a key INVALID_ARGUMENT
	// ([ReasonMissingKey]), without running the handler.
	RequireKey bool
	// Skip runs the method's calls unprotected, with or without a key.
	Skip bool
}

func (p Policy) engine() engine.Policy {
	return engine.Policy{Keys: engine.KeySource(p.Keys), RequireKey: p.RequireKey, Skip: p.Skip}
}

// RetryPolicy is the budget of the client interceptors' retries. Zero
// fields take their defaults.
type RetryPolicy struct {
	// MaxAttempts is how many times a call is sent at most, the first time
	// included. Default 5; 1 never retries.
	MaxAttempts int
	// MaxElapsed is how long after the first attempt the last may start.
	// Default a minute, or half the KeyWindow if that is shorter.
	// It must be at most half the KeyWindow.
	MaxElapsed time.Duration
	// KeyWindow is how long the server remembers a key. Default
	// idempotency.DefaultExpiry, the server interceptors' default.
	KeyWindow time.Duration
	// BaseDelay is the backoff before the first retry, doubled for each
	// retry after it. Default 100 milliseconds.
	BaseDelay time.Duration
	// MaxDelay caps the backoff. Default 5 seconds. It does not cap
	// a RetryInfo's delay: an answer that asks for more time than the
	// budget has left is final.
	MaxDelay time.Duration
}

// A ServerOption configures a server interceptor: grpcgo's or
// connectgo's NewServerInterceptor.
type ServerOption interface {
	// ApplyServer applies the option. Only the interceptors call it: its
	// argument's type is internal to the module.
	ApplyServer(*engine.Server)
}

// A ClientOption configures a client interceptor: grpcgo's or
// connectgo's NewClientInterceptor.
type ClientOption interface {
	// ApplyClient applies the option, as ApplyServer does.
	ApplyClient(*engine.Client)
}

// An Option configures both interceptors.
type Option interface {
	ServerOption
	ClientOption
}

type serverOption func(*engine.Server)

func (f serverOption) ApplyServer(s *engine.Server) { f(s) }

type clientOption func(*engine.Client)

func (f clientOption) ApplyClient(c *engine.Client) { f(c) }

// keyOption applies to both interceptors: each reads the key's place.
type keyOption func(*engine.Options, *engine.KeyPlace)

func (f keyOption) ApplyServer(s *engine.Server) { f(&s.Options, &s.KeyPlace) }

func (f keyOption) ApplyClient(c *engine.Client) { f(&c.Options, &c.KeyPlace) }

// WithKeyField sets the name of the request field that carries the key:
// a singular string field. Default [DefaultKeyField]. Requests without
// such a field read the metadata.
func WithKeyField(name string) Option {
	return keyOption(func(o *engine.Options, p *engine.KeyPlace) {
		o.Use("WithKeyField", false)
		if !engine.ValidField(name) {
			o.Fail("grpcidempotency.WithKeyField(%q): not a valid field name", name)
			return
		}
		p.KeyField = protoreflect.Name(name)
	})
}

// WithMetadataKey sets the metadata key that carries the key. Default
// [DefaultMetadataKey]. It must be lower case, and not a binary ("-bin") or
// reserved ("grpc-") key.
func WithMetadataKey(key string) Option {
	return keyOption(func(o *engine.Options, p *engine.KeyPlace) {
		o.Use("WithMetadataKey", false)
		if !engine.ValidMetadataKey(key) {
			o.Fail("grpcidempotency.WithMetadataKey(%q): not a valid metadata key (lower case, not -bin, not grpc-)", key)
			return
		}
		p.MetadataKey = key
	})
}

// WithKeyFunc sets the function that reads the key from a request message
// in place of the key field. Use it for a key in a nested message, such as
// AEP-155's idempotency_key.key. An empty string means no key. It may not
// be given with [WithKeyField].
func WithKeyFunc(key func(req proto.Message) string) ServerOption {
	return serverOption(func(s *engine.Server) {
		s.Use("WithKeyFunc", false)
		if key == nil {
			s.Fail("grpcidempotency.WithKeyFunc: nil function")
			return
		}
		s.KeyFunc = key
	})
}

// WithGuardOptions passes options of package idempotency to the Guard
// that the interceptor runs calls on. These are [idempotency.WithKeyPrefix],
// WithExpiry, WithWait, WithLease, WithObserver, WithTransactions and the
// others of kind [idempotency.GuardOption]. It may be given more than once.
func WithGuardOptions(opts ...idempotency.GuardOption) ServerOption {
	return serverOption(func(s *engine.Server) {
		s.Use("WithGuardOptions", true)
		s.GuardOptions = append(s.GuardOptions, opts...)
	})
}

// WithPolicy sets the policy of the methods that [WithMethodPolicy] does
// not name. Default the zero [Policy].
func WithPolicy(p Policy) ServerOption {
	return serverOption(func(s *engine.Server) {
		s.Use("WithPolicy", false)
		if err := engine.CheckPolicy(p.engine()); err != nil {
			s.Fail("grpcidempotency.WithPolicy: %v", err)
			return
		}
		s.Default = p.engine()
	})
}

// WithMethodPolicy sets the policy of one method, named in full
// ("/orders.v1.Orders/CreateOrder": grpc.UnaryServerInfo's FullMethod,
// connect.Spec's Procedure).
// It may be given once for each method.
func WithMethodPolicy(fullMethod string, p Policy) ServerOption {
	return serverOption(func(s *engine.Server) {
		s.Use("WithMethodPolicy", true)
		switch err := engine.CheckPolicy(p.engine()); {
		case !engine.ValidMethod(fullMethod):
			s.Fail("grpcidempotency.WithMethodPolicy(%q): not a full method name, /package.Service/Method", fullMethod)
		case err != nil:
			s.Fail("grpcidempotency.WithMethodPolicy(%q): %v", fullMethod, err)
		case s.Methods[fullMethod] != nil:
			s.Fail("grpcidempotency.WithMethodPolicy(%q) given twice; give it once", fullMethod)
		default:
			if s.Methods == nil {
				s.Methods = map[string]*engine.Policy{}
			}
			ep := p.engine()
			s.Methods[fullMethod] = &ep
		}
	})
}

// WithScope sets the function that tells callers apart. It returns who is
// calling, from what the server authenticated, or an error that wraps
// [ErrNoScope]. The scope is part of the record's key, so callers in
// different scopes never share a record. It is called only for calls with
// a key. Without it, all callers share one key space. That is safe only
// when keys are unguessable and callers are trusted not to reuse each
// other's.
//
// The function finds the call in ctx. For gRPC, grpcgo's
// ScopePeerCertificate and ScopeMetadata read its peer and metadata. For
// Connect, connect.CallInfoForHandlerContext(ctx) gives its headers and
// peer. Claims that an authentication interceptor or middleware before
// this one put in ctx (connectrpc.com/authn does) serve both.
func WithScope(scope func(ctx context.Context) (string, error)) ServerOption {
	return serverOption(func(s *engine.Server) {
		s.Use("WithScope", false)
		if scope == nil {
			s.Fail("grpcidempotency.WithScope: nil function")
			return
		}
		s.Scope = scope
	})
}

// WithStoreServerErrors stores and replays results with the codes
// INTERNAL, UNKNOWN and DATA_LOSS, as Stripe stores 5xx responses. Without
// it, the key is released so that a retry runs the handler again. Use it
// when such an error can follow a side effect that must not be repeated.
// The codes that say the call did not execute are released all the same.
func WithStoreServerErrors() ServerOption {
	return serverOption(func(s *engine.Server) {
		s.Use("WithStoreServerErrors", false)
		s.StoreServerErrors = true
	})
}

// WithMaxRetryDelay caps the delay of the google.rpc.RetryInfo of ABORTED,
// the answer to a call whose key is held by another call still running.
// The default cap is 2 seconds. The delay is how long the handler usually
// takes, measured over its recent runs. It is at least 10 milliseconds and
// at most max. It is never more than the time until the other call's
// reservation lapses.
func WithMaxRetryDelay(max time.Duration) ServerOption {
	return serverOption(func(s *engine.Server) {
		s.Use("WithMaxRetryDelay", false)
		if max < 10*time.Millisecond {
			s.Fail("grpcidempotency.WithMaxRetryDelay(%v): must be at least 10ms", max)
			return
		}
		s.MaxRetryDelay = max
	})
}

// WithRetry sets the client's budget of retries. Default the zero
// [RetryPolicy], with its defaults.
func WithRetry(p RetryPolicy) ClientOption {
	return clientOption(func(c *engine.Client) {
		c.Use("WithRetry", false)
		c.Retry = engine.RetryPolicy(p)
	})
}

// WithKeyedMethods names methods whose calls get a key in the metadata
// when their request message has no key field, by full name
// ("/orders.v1.Orders/CreateOrder"). Calls of other methods without a key
// field pass through, once, unless the caller gives them a key
// ([ContextWithKey]). It may be given more than once.
func WithKeyedMethods(fullMethods ...string) ClientOption {
	return clientOption(func(c *engine.Client) {
		c.Use("WithKeyedMethods", true)
		for _, m := range fullMethods {
			if !engine.ValidMethod(m) {
				c.Fail("grpcidempotency.WithKeyedMethods: %q is not a full method name, /package.Service/Method", m)
				continue
			}
			if c.Methods == nil {
				c.Methods = map[string]bool{}
			}
			c.Methods[m] = true
		}
	})
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
