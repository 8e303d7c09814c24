// Package connectgo has the interceptors of package grpcidempotency for
// Connect (connectrpc.com/connect, connect-go): a server interceptor that
// runs each unary call with an idempotency key at most once per key, and
// a client interceptor that gives calls a key and retries them with it.
// Their options, keys and answers are grpcidempotency's, and so is their
// documentation: read that package's, and docs/grpc.md in the repository.
// It links no package of google.golang.org/grpc.
//
//	idem, err := connectgo.NewServerInterceptor(store,
//		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
//	mux.Handle(ordersv1connect.NewOrdersHandler(svc, connect.WithInterceptors(idem)))
//
//	retry, err := connectgo.NewClientInterceptor()
//	client := ordersv1connect.NewOrdersClient(http.DefaultClient, url, connect.WithInterceptors(retry))
//
// A handler serves the Connect, gRPC and gRPC-Web protocols, over HTTP/1.1
// and HTTP/2, and the interceptor protects calls of each alike. The key's
// metadata is the Idempotency-Key request header (idempotency-key in gRPC
// metadata), the same header as the HTTP adapters'. A replay carries the
// stored response headers and trailers, and the header
// Idempotent-Replayed: true; a replayed error carries them in its
// metadata (connect.Error's Meta). Headers that the handler sets through
// connect.CallInfo count too, but not those set before the interceptor
// ran. Binary headers ("-bin") are kept as Connect carries them, in
// base64.
//
// The gRPC and Connect interceptors, given the same prefix and store,
// share records: a call retried over the other framework gets its replay.
//
// A scope function ([grpcidempotency.WithScope]) finds the call's headers
// and peer with connect.CallInfoForHandlerContext. Connect has no peer
// certificate to scope by, so scope by what an authentication middleware
// put in the context (connectrpc.com/authn), or by a header that a
// trusted proxy sets.
//
// The client interceptor sets the key field in a copy of the request
// message, which it puts in the connect.Request for the call and takes
// out again after it, and likewise a key it adds to the headers, so that
// the caller's request is unchanged when the call returns; do not use one
// connect.Request for concurrent calls. gRPC reports an answer that a
// broken connection lost as UNAVAILABLE. Connect reports it with the code
// of the step that failed: UNAVAILABLE before the reply's header, UNKNOWN
// or INVALID_ARGUMENT ("incomplete envelope") after it. While the call's
// own context goes on, the client interceptor takes an error that Connect
// made of the transport's (a reset, a reply that ended early, a network
// error), not one that the server sent, for a lost answer, UNAVAILABLE,
// and retries. Connect has no retries of its own, so nothing multiplies
// the interceptor's attempts.
//
// Streaming calls pass through, unprotected.
package connectgo
