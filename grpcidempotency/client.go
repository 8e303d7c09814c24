package grpcidempotency

import (
	"context"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
)

// NewClientInterceptor returns a unary client interceptor that gives each
// mutating call one idempotency key and sends it again, with the same
// key, when the answer was lost or says to try again later (see the
// package documentation, Clients). It fails if an option is invalid.
//
//	idem, err := grpcidempotency.NewClientInterceptor()
//	if err != nil {
//		log.Fatal(err)
//	}
//	conn, err := grpc.NewClient(target, grpc.WithChainUnaryInterceptor(idem), ...)
func NewClientInterceptor(opts ...ClientOption) (grpc.UnaryClientInterceptor, error) {
	s, err := newClientSettings("grpcidempotency: NewClientInterceptor", opts)
	if err != nil {
		return nil, err
	}
	cfg := s.cfg
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		ctxKey, _ := ctx.Value(clientKey{}).(string)
		k, ok, err := cfg.Prepare(method, asMessage(req), md.Get(cfg.MetadataKey), ctxKey)
		switch {
		case err != nil:
			return status.Error(codes.InvalidArgument, "grpcidempotency: "+err.Error())
		case !ok:
			return invoker(ctx, method, req, reply, cc, opts...)
		case k.Metadata:
			ctx = metadata.AppendToOutgoingContext(ctx, cfg.MetadataKey, k.Key)
		}
		send := req
		if k.Request != asMessage(req) {
			send = k.Request // a copy, with the key in its field
		}
		err = cfg.Retry.Do(ctx, nil, func() error {
			return invoker(ctx, method, send, reply, cc, opts...)
		}, func(err error) *spb.Status { return status.Convert(err).Proto() })
		if _, isStatus := status.FromError(err); err != nil && !isStatus {
			// The call's context ended while it waited for a retry.
			return status.FromContextError(err).Err()
		}
		return err
	}, nil
}

type clientKey struct{}

// ContextWithKey returns a context that makes the client interceptor send
// the call made with it with key, unless the call carries one: keep the
// key with the operation (in the database row of the order that the call
// creates, say), so that the operation can be sent again with the same key
// later, by a process that restarted. A key is 1 to MaxKeyLength
// characters, printable ASCII when it goes in the metadata; the call fails
// with INVALID_ARGUMENT before it is sent if it is not.
func ContextWithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, clientKey{}, key)
}

// NewKey returns a new key: a random (version 4) UUID, from crypto/rand,
// as AIP-155 recommends.
func NewKey() string { return engine.NewKey() }

// Replayed reports whether header, the response header of a call
// (grpc.Header), marks a replay: the stored answer to an earlier call
// with the same key, not the answer of a run of this call.
func Replayed(header metadata.MD) bool {
	v := header.Get(MetadataReplayed)
	return len(v) > 0 && v[0] == "true"
}
