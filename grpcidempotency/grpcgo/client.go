package grpcgo

import (
	"context"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
)

// NewClientInterceptor returns a unary client interceptor that gives each
// mutating call one idempotency key. It sends the call again, with the
// same key, when the answer was lost or says to try again later. The
// package documentation of grpcidempotency says more (Clients). It fails
// if an option is invalid.
//
//	idem, err := grpcgo.NewClientInterceptor()
//	if err != nil {
//		log.Fatal(err)
//	}
//	conn, err := grpc.NewClient(target, grpc.WithChainUnaryInterceptor(idem), ...)
func NewClientInterceptor(opts ...grpcidempotency.ClientOption) (grpc.UnaryClientInterceptor, error) {
	cfg, err := engine.NewClientConfig("grpcgo: NewClientInterceptor", opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		k, ok, err := cfg.Prepare(ctx, method, asMessage(req), md.Get(cfg.MetadataKey))
		switch {
		case err != nil:
			return status.Error(codes.InvalidArgument, "grpcgo: "+err.Error())
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
