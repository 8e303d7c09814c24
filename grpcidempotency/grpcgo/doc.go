// Package grpcgo has the interceptors of package grpcidempotency for
// google.golang.org/grpc (grpc-go): a unary server interceptor that runs
// each call with an idempotency key at most once per key, and a unary
// client interceptor that gives calls a key and retries them with it.
// Their options, keys and answers are grpcidempotency's, and so is their
// documentation: read that package's, and docs/grpc.md in the repository.
//
//	idem, err := grpcgo.NewServerInterceptor(store,
//		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, idem))
//
//	retry, err := grpcgo.NewClientInterceptor()
//	conn, err := grpc.NewClient(target, grpc.WithChainUnaryInterceptor(retry), ...)
//
// [ScopePeerCertificate] and [ScopeMetadata] are scope functions for
// [grpcidempotency.WithScope], from what gRPC knows of the caller.
//
// A replay carries the header and trailer metadata that the first call's
// handler set (grpc.SetHeader, SendHeader, SetTrailer), and the header
// idempotent-replayed: true ([grpcidempotency.Replayed]). Streaming calls
// do not go through unary interceptors: they pass through, unprotected.
//
// gRPC reports an answer that a broken connection lost as UNAVAILABLE,
// which the client interceptor retries. gRPC's own retries (a retryPolicy
// in the service config) resend an attempt's message and metadata as
// they are, so they keep its key, and are safe. But they run inside each
// attempt of the interceptor: with both, attempts multiply (5 of gRPC's
// in each of 5 of the interceptor's is 25). Give the methods that the
// interceptor retries no retryPolicy, or none that retries UNAVAILABLE or
// ABORTED, or let gRPC retry them and set the interceptor's MaxAttempts
// to 1 ([grpcidempotency.RetryPolicy]); gRPC's policy ignores RetryInfo,
// so KEY_IN_USE is then retried on its own backoff. gRPC's transparent retries, of calls that never reached the
// server, are unaffected.
package grpcgo
