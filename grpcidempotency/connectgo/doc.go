// Package connectgo has the interceptors of package grpcidempotency for
// Connect (connectrpc.com/connect, connect-go). The server interceptor
// runs each unary call with an idempotency key at most once per key. The
// client interceptor gives calls a key and retries them with it. Their
// options, keys and answers are grpcidempotency's, and so is their
// documentation. Read that package's, and docs/grpc.md in the repository.
// This package links no package of google.golang.org/grpc.
//
//	idem, err := connectgo.NewServerInterceptor(store,
//		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
//	mux.Handle(ordersv1connect.NewOrdersHandler(svc, connect.WithInterceptors(idem)))
//
//	retry, err := connectgo.NewClientInterceptor()
//	client := ordersv1connect.NewOrdersClient(http.DefaultClient, url, connect.WithInterceptors(retry))
//
// A handler serves the Connect, gRPC and gRPC-Web protocols, over HTTP/1.1
// and HTTP/2. The interceptor protects calls of each alike. The key's
// metadata is the Idempotency-Key request header (idempotency-key in gRPC
// metadata), the same header as the HTTP adapters'.
//
// A replay carries the stored response headers and trailers. It also
// carries the header Idempotent-Replayed: true. A replayed error carries
// them in its metadata (connect.Error's Meta). Headers that the handler
// sets through connect.CallInfo count too. Those set before the
// interceptor ran do not. Binary headers ("-bin") are kept as Connect
// carries them, in base64.
//
// The gRPC and Connect interceptors, given the same prefix and store,
// share records. A call retried over the other framework gets its replay.
//
// A scope function ([grpcidempotency.WithScope]) finds the call's headers
// and peer with connect.CallInfoForHandlerContext. Connect has no peer
// certificate to scope by. So scope by what an authentication middleware
// put in the context (connectrpc.com/authn), or by a header that a trusted
// proxy sets.
//
// The client interceptor sets the key field in a copy of the request
// message. It puts the copy in the connect.Request for the call and takes
// it out again after the call. It does the same with a key it adds to the
// headers. So the caller's request is unchanged when the call returns. Do
// not use one connect.Request for concurrent calls.
//
// gRPC reports an answer that a broken connection lost as UNAVAILABLE.
// Connect reports it with the code of the step that failed. That is
// UNAVAILABLE before the reply's header, and UNKNOWN or INVALID_ARGUMENT
// ("incomplete envelope") after it. The client interceptor takes such an
// error for a lost answer, UNAVAILABLE, and retries. It does so while the
// call's own context goes on. It does so only for an error that Connect
// made of the transport's. Examples are a reset, a reply that ended early
// and a network error. An error that the server sent is not taken for a lost
// answer. Connect has no retries of its own, so nothing multiplies the
// interceptor's attempts.
//
// Streaming calls pass through, unprotected.
package connectgo
