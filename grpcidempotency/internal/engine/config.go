// Package engine is what the gRPC and Connect interceptors share: their
// configuration (which the options of package grpcidempotency write), the
// server's path of a call through an idempotency.Guard (keys,
// fingerprints, which results are stored, the answers), the stored form
// of a result, and the client's retries. It speaks protocol buffers and
// google.rpc.Status, never a gRPC or Connect type, so that each adapter
// links only its own framework.
package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/retrysafe/retrysafe/idempotency"
)

// Defaults shared by both adapters; package grpcidempotency exports them.
const (
	DefaultKeyField      = "request_id"
	DefaultMetadataKey   = "idempotency-key"
	MetadataReplayed     = "idempotent-replayed"
	MaxKeyLength         = 255
	DefaultMaxRetryDelay = 2 * time.Second
	// ErrorDomain is the domain of the google.rpc.ErrorInfo of the
	// interceptors' own answers.
	ErrorDomain = "github.com/retrysafe/retrysafe"
)

// ErrNoScope is what scope functions wrap when the call does not say who
// is asking.
var ErrNoScope = errors.New("idempotency: the call does not identify its caller")

// A KeySource says where a method's key is read, and which source wins
// when a call carries both.
type KeySource int

// The key sources; package grpcidempotency exports them.
const (
	FieldFirst KeySource = iota
	MetadataFirst
	FieldOnly
	MetadataOnly
)

func (s KeySource) valid() bool { return s >= FieldFirst && s <= MetadataOnly }

// Policy is what the server does with a method's calls.
type Policy struct {
	Keys       KeySource
	RequireKey bool
	Skip       bool
}

// KeyPlace is where calls carry their key: the request field, else the
// metadata key.
type KeyPlace struct {
	KeyField    protoreflect.Name
	MetadataKey string
}

// Config is the resolved configuration of a server interceptor.
type Config struct {
	KeyPlace
	GuardOptions []idempotency.GuardOption
	KeyFunc      func(proto.Message) string
	// Scope returns the caller's scope; nil when callers share one key
	// space.
	Scope             func(context.Context) (string, error)
	Default           Policy
	Methods           map[string]*Policy
	StoreServerErrors bool
	MaxRetryDelay     time.Duration
}

// policy returns the policy of the method named method.
func (c *Config) policy(method string) Policy {
	if p := c.Methods[method]; p != nil {
		return *p
	}
	return c.Default
}

// ClientConfig is the resolved configuration of a client interceptor.
type ClientConfig struct {
	KeyPlace
	// Methods get a key in the metadata when their requests have no key
	// field.
	Methods map[string]bool
	Retry   RetryPolicy
}

// Options records the options of one entry point as they are applied:
// which were given, and what was wrong with them. The option
// constructors of package grpcidempotency write it.
type Options struct {
	name  string
	given map[string]bool
	errs  []error
}

// newOptions starts the options of the entry point named name
// ("grpcgo: NewServerInterceptor").
func newOptions(name string) Options { return Options{name: name, given: map[string]bool{}} }

// Use records that the option named name was given; only repeatable
// options may be given twice.
func (o *Options) Use(name string, repeatable bool) {
	if o.given[name] && !repeatable {
		o.errs = append(o.errs, fmt.Errorf("%s given twice; give it once", name))
	}
	o.given[name] = true
}

// Given reports whether the option named name was given.
func (o *Options) Given(name string) bool { return o.given[name] }

// Fail records that an option is invalid.
func (o *Options) Fail(format string, args ...any) {
	o.errs = append(o.errs, fmt.Errorf(format, args...))
}

// Err returns every problem recorded, after the entry point's name.
func (o *Options) Err() error {
	errs := make([]error, len(o.errs))
	for i, err := range o.errs {
		errs[i] = fmt.Errorf("%s: %w", o.name, err)
	}
	return errors.Join(errs...)
}

// Server is what the options of a server interceptor write: its
// configuration, and the record of the options.
type Server struct {
	Options
	Config
}

// Client is what the options of a client interceptor write.
type Client struct {
	Options
	ClientConfig
}

// ServerOption is grpcidempotency.ServerOption, as the engine sees it.
type ServerOption interface{ ApplyServer(*Server) }

// ClientOption is grpcidempotency.ClientOption, as the engine sees it.
type ClientOption interface{ ApplyClient(*Client) }

// NewConfig returns the configuration of a server interceptor: the
// defaults, with opts applied in order. Its error reports every problem of
// opts, after the entry point's name.
func NewConfig[O ServerOption](name string, opts []O) (*Config, error) {
	s := &Server{Options: newOptions(name), Config: Config{
		KeyPlace:      KeyPlace{KeyField: DefaultKeyField, MetadataKey: DefaultMetadataKey},
		MaxRetryDelay: DefaultMaxRetryDelay,
	}}
	for _, opt := range opts {
		if any(opt) == nil {
			s.Fail("nil option")
			continue
		}
		opt.ApplyServer(s)
	}
	if s.Given("WithKeyField") && s.Given("WithKeyFunc") {
		s.Fail("WithKeyField and WithKeyFunc both say where the key is; give one")
	}
	return &s.Config, s.Err()
}

// NewClientConfig returns the configuration of a client interceptor, as
// NewConfig does for a server's, its RetryPolicy resolved.
func NewClientConfig[O ClientOption](name string, opts []O) (*ClientConfig, error) {
	c := &Client{Options: newOptions(name), ClientConfig: ClientConfig{
		KeyPlace: KeyPlace{KeyField: DefaultKeyField, MetadataKey: DefaultMetadataKey},
	}}
	for _, opt := range opts {
		if any(opt) == nil {
			c.Fail("nil option")
			continue
		}
		opt.ApplyClient(c)
	}
	retry, err := c.Retry.Resolve()
	if err != nil {
		c.Fail("grpcidempotency.WithRetry: %v", err)
	}
	c.Retry = retry
	return &c.ClientConfig, c.Err()
}

// ValidField checks a key field's name.
func ValidField(name string) bool { return protoreflect.Name(name).IsValid() }

// ValidMetadataKey checks a metadata key: lower-case letters, digits and
// - _ . only, as gRPC allows, and not a binary ("-bin") or reserved
// ("grpc-") key.
func ValidMetadataKey(key string) bool {
	if key == "" || strings.HasSuffix(key, "-bin") || strings.HasPrefix(key, "grpc-") {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// ValidMethod checks a full method name, "/package.Service/Method".
func ValidMethod(method string) bool {
	service, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	return strings.HasPrefix(method, "/") && ok && protoreflect.FullName(service).IsValid() && protoreflect.Name(name).IsValid()
}

// CheckPolicy checks a policy.
func CheckPolicy(p Policy) error {
	switch {
	case !p.Keys.valid():
		return fmt.Errorf("unknown KeySource %d", p.Keys)
	case p.Skip && p.RequireKey:
		return errors.New("Skip and RequireKey both set: a skipped method requires nothing")
	}
	return nil
}
