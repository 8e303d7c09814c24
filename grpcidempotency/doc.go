// Package grpcidempotency gives gRPC and Connect services the request IDs
// of AIP-155. A mutating call carries a unique key and runs at most once
// per key. Every retry with the key gets the first call's response. The
// package is for RPC what httpapi.Middleware is for net/http. It runs on
// the same engine (an [idempotency.Guard]) and the same stores (DynamoDB,
// Redis, PostgreSQL, memory). The file docs/grpc.md in the repository is
// the page for API clients.
//
// The interceptors are in two packages, one for each Go framework, named
// after its repository: grpcgo for google.golang.org/grpc (grpc-go) and
// connectgo for connectrpc.com/connect (connect-go). This package imports
// neither framework, and holds what the two share: the options, the
// policies, the reasons of the answers and the client's keys. So each
// option, reason and policy is written, documented and learned once, for
// both, and a Connect service links no gRPC.
//
//	idem, err := grpcgo.NewServerInterceptor(store,
//		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, idem))
//
//	retry, err := grpcgo.NewClientInterceptor()
//	conn, err := grpc.NewClient(target, grpc.WithChainUnaryInterceptor(retry), ...)
//
// For Connect, connectgo's interceptors take the same options:
//
//	idem, err := connectgo.NewServerInterceptor(store,
//		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
//	mux.Handle(ordersv1connect.NewOrdersHandler(svc, connect.WithInterceptors(idem)))
//
// It is a module of its own, so that the library's go.mod requires
// neither gRPC nor Connect. It needs Go 1.25, as the library does.
//
// # Keys
//
// The key of a call is the request message's request_id field, as AIP-155
// names it. It is a singular string field, found by name through
// protoreflect. [WithKeyField] names another field. [WithKeyFunc] reads a
// key anywhere, such as AEP-155's idempotency_key.key. Requests without
// such a field carry the key in the idempotency-key metadata (see
// [WithMetadataKey]). For Connect, that is the Idempotency-Key header.
//
// A [Policy] says where the key is read, per method ([WithMethodPolicy])
// or for all ([WithPolicy]). It says which source wins when a call carries
// both: [FieldFirst] (the default), [MetadataFirst], [FieldOnly] or
// [MetadataOnly]. The other source is then ignored. It also says what
// happens to a call without a key. Such a call runs unprotected, since
// AIP-155 makes request IDs optional. [Policy.RequireKey] answers it
// INVALID_ARGUMENT instead. Skip leaves a method alone. Calls whose request
// is not a protocol buffers message pass through.
//
// Keys are 1 to [MaxKeyLength] (255) characters of UTF-8 without control
// characters, compared exactly. AIP-155 restricts its example to 36 ASCII
// characters, a UUID. Longer keys are accepted too, since clients of other
// APIs send them (Stripe allows 255). Only a hash of the key is stored, so
// its length costs nothing. An API that wants UUIDs only says so in its
// documentation and checks them in the handler.
//
// The record of a key is found by hashing [scope, key] under the Guard's
// prefix. [idempotency.WithKeyPrefix] sets the prefix. Without it, the
// prefix is the function name on Lambda, else "idempotency". Services that
// share a table set their own prefix. The gRPC and Connect interceptors,
// given the same prefix and store, share records. So a call retried over
// the other protocol gets its replay.
//
// [WithScope] makes the caller part of the key. The function may be
// grpcgo's ScopePeerCertificate or ScopeMetadata, or one of your own. Two
// callers who choose the same key never see each other's responses.
//
// # Fingerprints
//
// A call's fingerprint is the SHA-256 of its full method name and its
// request message in the deterministic protobuf encoding. A retry with the
// same key and another request is refused. So is the same request to
// another method. Maps encode in key order, and unknown fields as they
// came. So the same request gives the same fingerprint on every server
// that runs the same version of its .proto. Two versions of a server may
// encode a request differently, when one knows a field that the other
// keeps as unknown. They may refuse a retry that crosses a deployment.
//
// # Answers
//
// The server interceptors answer as follows. Their own answers carry a
// google.rpc.ErrorInfo whose domain is [ErrorDomain]. Its reason is one of
// the Reason constants. They carry the details that docs/grpc.md lists
// too.
//
//	Situation                                     Code                Reason
//	method needs a key, call has none             INVALID_ARGUMENT    MISSING_KEY (+ BadRequest on request_id)
//	key empty (metadata), too long, not UTF-8,    INVALID_ARGUMENT    INVALID_KEY (+ BadRequest)
//	  control characters, several in metadata
//	scope function finds no caller (ErrNoScope)   UNAUTHENTICATED     MISSING_SCOPE
//	first call with the key                       the handler's answer
//	retry after the first completed               the stored answer, with its header and trailer metadata, plus idempotent-replayed: true
//	retry while the first runs                    ABORTED             KEY_IN_USE, + RetryInfo (idempotency.WithWait: waits instead)
//	retry after the first ended without an        FAILED_PRECONDITION KEY_HELD, until an operator releases the key
//	  outcome, idempotency.WithHoldUntilReleased
//	retry with another request or method          INVALID_ARGUMENT    KEY_REUSED (+ BadRequest)
//	store failed before the handler ran           UNAVAILABLE         STORE_UNAVAILABLE, + RetryInfo of 1 s
//	retry of a key whose error was recorded       its status, or INTERNAL RECORDED_ERROR
//	retry of a key whose response was too large   INTERNAL            RESPONSE_NOT_STORED
//	the call's context ends while it waits        CANCELLED or DEADLINE_EXCEEDED
//
// A mismatched request is INVALID_ARGUMENT, not FAILED_PRECONDITION. The
// two differ in what the client must fix. FAILED_PRECONDITION asks it to
// change the system's state and retry. INVALID_ARGUMENT asks it to change
// its request. A reused key is a mistake in the request. No change of
// state makes the key right for it, and the fix is a new key. It is also
// what Stripe (400) and the IETF draft (422) answer. Every refusal of a
// key is then one code, with the reason to tell them apart.
//
// A held key (KEY_HELD) is FAILED_PRECONDITION for the same reason turned
// around. The request is right, and the state must change first. This
// happens with [idempotency.WithHoldUntilReleased]. A call that ended
// without an outcome then keeps its key when its reservation lapses. It
// crashed, timed out, or its result could not be stored. A retry does not
// run it again. The key stays held until an operator checks its effect
// and releases it (retrysafe release). The answer is not stored and
// carries no RetryInfo. The client interceptors do not retry it. Its
// ErrorInfo's metadata has held_since, when the reservation lapsed (RFC
// 3339).
//
// The RetryInfo of ABORTED is the HTTP adapters' Retry-After, without
// their rounding to whole seconds. It is how long the handler usually
// takes, a moving average of its recent runs. It is at most
// [WithMaxRetryDelay] (2 s by default) and the time until the first call's
// reservation lapses. It is at least 10 ms. A retry then usually gets the
// replay. A handler's own ABORTED carries no such ErrorInfo.
//
// # Which results are stored
//
// A result is stored when it says that the call executed. It is then
// replayed to every retry with its key until the key expires. Results that
// say the call did not execute are returned but not stored. Their key is
// released, so that the client can fix the cause and retry with the same
// key. These are the gRPC counterparts of the HTTP adapters' rules:
//
//	Code                                   Stored  Why (HTTP counterpart)
//	OK                                     yes     the call executed (2xx)
//	INVALID_ARGUMENT, NOT_FOUND,           yes     an answer about the request; a retry gets the same one (400, 404, 422)
//	  ALREADY_EXISTS, FAILED_PRECONDITION,
//	  OUT_OF_RANGE
//	CANCELLED, DEADLINE_EXCEEDED           no      the call may not have run; the client retries it (408, 504)
//	UNAUTHENTICATED, PERMISSION_DENIED     no      the credentials may be fixed, then retried (401, 403)
//	RESOURCE_EXHAUSTED                     no      throttled; retry later (429)
//	ABORTED                                no      a conflict; retry later (409)
//	UNAVAILABLE                            no      retry later (503)
//	UNIMPLEMENTED                          no      the call did not run; a newer server may run it (501)
//	INTERNAL, UNKNOWN, DATA_LOSS           no      the call may not have run (500); WithStoreServerErrors stores them
//
// Stored results keep their status message and details. They keep the
// header and trailer metadata that the handler set too (grpcgo and
// connectgo say which).
//
// UNIMPLEMENTED, UNKNOWN and DATA_LOSS are not stored, though they are not
// among the retryable codes:
//   - UNIMPLEMENTED says the call did not run. During a rolling deployment,
//     a retry may reach a server that implements the method.
//   - UNKNOWN is what a handler's plain Go error becomes. The HTTP
//     adapters release such errors too.
//   - DATA_LOSS is a server error like INTERNAL.
//
// A handler marks any other result as not executed with
// [idempotency.MarkNotExecuted]. An example is INVALID_ARGUMENT from
// validation that ran before the side effect. Some released errors are
// recorded instead: those that [idempotency.Permanent] or
// [idempotency.WithPermanentErrors] marks as permanent. The classifier
// sees the handler's error. Their retries get the status that
// [idempotency.WithErrorDecoder] gives the error, or INTERNAL.
//
// A handler that panics releases the key, and the panic goes on, to a
// recovery interceptor or to the server.
//
// Streaming calls do not go through unary interceptors: they pass
// through, unprotected.
//
// # Options
//
// The interceptors take options of their own kind:
//   - [ServerOption] for the server interceptors;
//   - [ClientOption] for the client ones;
//   - [Option], which is both, for the key's place ([WithKeyField],
//     [WithMetadataKey]).
//
// So an option given where it does not apply does not compile. Each option
// applies itself to the configuration of its kind, as those of
// go.opentelemetry.io/otel/trace do. One option serves both frameworks.
//
// The options of package idempotency that configure a Guard go through
// [WithGuardOptions], in their own kind, [idempotency.GuardOption]. The
// expiry, prefix, wait, lease, observers and transactions are the Guard's.
// They keep their documentation and checks there. The options that select
// keys from typed inputs ([idempotency.WithKey]) are not GuardOptions. They
// do not compile there.
//
// Each interceptor takes one list of options, checked when it is made. It
// reports every problem at once. That is the form of grpc.NewServer and
// connect.NewHandler. The plain data of a [Policy] or a [RetryPolicy] goes
// in a struct, as the AWS SDK's Options do.
//
// Without [idempotency.WithExpiry], keys are remembered for
// [idempotency.DefaultExpiry], an hour. AIP-155 lets an API choose. Many of
// Google Cloud's APIs honour request IDs for at least 60 minutes.
//
// # Clients
//
// The client interceptors give a call a key when its request message has
// the key field. When the field is set, the key is the caller's own. Else
// it is the key of [ContextWithKey], or a new UUID ([NewKey]). That key is
// set in a copy of the request, so the caller's message is never changed.
// Calls of the methods that
// [WithKeyedMethods] names carry the key in the metadata instead, when
// their request has no key field. Calls without a key pass through, once.
// A keyed call is sent again with the same key, as follows:
//
//	Answer                                Client interceptors
//	UNAVAILABLE (a lost connection too)   retries after its RetryInfo, or a backoff
//	ABORTED with a RetryInfo              retries after the RetryInfo (KEY_IN_USE)
//	FAILED_PRECONDITION (KEY_HELD)        returns it: only an operator's release frees the key
//	anything else, ABORTED without one    returns it
//	the call's context ends               returns CANCELLED or DEADLINE_EXCEEDED
//
// Retries stay within the [RetryPolicy] of [WithRetry]. It allows at most
// MaxAttempts attempts (5). None starts later than MaxElapsed (a minute)
// after the first. MaxElapsed must stay within half the server's KeyWindow
// (an hour), so that no retry reaches a server that forgot the key. The
// backoff is exponential with jitter. It starts at BaseDelay (100 ms),
// doubles, and is at most MaxDelay (5 s).
//
// A broken connection cancels the server's calls on it. A call may be
// cancelled while its reservation was on its way to the store. The
// reservation may then stay there with no one to release it. Its key then
// answers KEY_IN_USE until the reservation lapses, within the Guard's
// lease. On servers, whose calls have no deadline, the lease is 30 s by
// default ([idempotency.WithLease]). When the call has a deadline, the
// lease is that deadline. Keep MaxElapsed longer than that.
//
// How each framework reports a lost answer, and how its own retries mix
// with the interceptor's, is in the documentation of grpcgo and connectgo.
package grpcidempotency
