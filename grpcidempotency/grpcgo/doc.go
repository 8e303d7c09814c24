// Package grpcgo has the interceptors of package grpcidempotency for
// google.golang.org/grpc (grpc-go). The unary server interceptor runs each
// call with an idempotency key at most once per key. The unary client
// interceptor gives calls a key and retries them with it. Their options,
// keys and answers are grpcidempotency's, and so is their documentation.
// Read that package's, and docs/grpc.md in the repository.
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
// handler set (grpc.SetHeader, SendHeader, SetTrailer). It also carries
// the header idempotent-replayed: true ([grpcidempotency.Replayed]).
// Streaming calls do not go through unary interceptors. They pass through,
// unprotected.
//
// gRPC reports an answer that a broken connection lost as UNAVAILABLE,
// which the client interceptor retries. gRPC's own retries (a retryPolicy
// in the service config) resend an attempt's message and metadata as they
// are. So they keep its key, and are safe. But they run inside each
// attempt of the interceptor. With both, attempts multiply: 5 of gRPC's in
// each of 5 of the interceptor's is 25. So choose one of these:
//   - Give the methods that the interceptor retries no retryPolicy, or none
//     that retries UNAVAILABLE or ABORTED.
//   - Let gRPC retry them, and set the interceptor's MaxAttempts to 1
//     ([grpcidempotency.RetryPolicy]). gRPC's policy ignores RetryInfo, so
//     KEY_IN_USE is then retried on its own backoff.
//
// gRPC's transparent retries, of calls that never reached the server, are
// unaffected.
package grpcgo
