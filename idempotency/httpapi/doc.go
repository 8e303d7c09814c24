// Package httpapi gives HTTP APIs the Idempotency-Key semantics of the IETF
// draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header) and of Stripe. It works on
// AWS Lambda and on any Go HTTP server. A client sends a unique key with a
// request that must not happen twice. Every retry with that key gets the
// first request's response, or a clear HTTP answer. On Lambda, that answer
// replaces a function error that API Gateway would turn into a 502.
//
// There is one adapter per Lambda event type: [WrapAPIGateway] (REST APIs,
// and HTTP APIs with payload format 1.0), [WrapAPIGatewayV2] (HTTP APIs),
// [WrapFunctionURL] and [WrapALB]. [Middleware] is the same for net/http
// servers, such as those on ECS, EKS, App Runner or Lambda Web Adapter. It
// also fits chi, gorilla/mux and echo. The adapters run on an
// [idempotency.Guard]. So the state machine and the store are those of
// package idempotency. They take its options ([idempotency.WithExpiry],
// [idempotency.WithLogger], ...) next to their own ([WithScope],
// [WithHeader], ...):
//
//	lambda.Start(idempotency.Must(httpapi.WrapAPIGatewayV2(createOrder, store,
//		httpapi.WithScope(httpapi.ScopePrincipal()))))
//
//	idem := idempotency.Must(httpapi.Middleware(store, httpapi.WithRequestScope(callerOf)))
//	mux.Handle("POST /orders", idem(http.HandlerFunc(createOrder)))
//
// Some options select keys from typed inputs or shape typed results. The
// adapters refuse them: [idempotency.WithKey],
// [idempotency.WithPayloadValidation], [idempotency.WithRequireKey] and
// [idempotency.WithResponseHook]. The adapters derive keys from the
// Idempotency-Key header and fingerprint requests themselves.
//
// Without [idempotency.WithKeyPrefix], the prefix is the one
// [idempotency.Wrap] would give the wrapped handler. [Middleware] wraps
// handlers whose Go names say nothing stable, so its prefix is "http".
// Behind Lambda Web Adapter, the function name and a dot come before it.
//
// # Requests
//
// Only POST and PATCH requests need a key (see [WithMethods]). Requests
// with other methods are idempotent by definition. They reach the handler
// unchanged, and so does its answer, whatever it is.
//
// The key is read from the Idempotency-Key header (see [WithHeader]). Its
// name is matched without regard to case. The key may be a Structured
// Field string, as the draft specifies
// ("8e03978e-40d5-43e8-bc93-6894a57f9324"). It may also be bare, as Stripe
// clients send it (8e03978e-40d5-43e8-bc93-6894a57f9324). Both forms give
// the same key.
//
// Keys are 1 to [MaxKeyLength] characters of valid UTF-8 without control
// characters. A bare key cannot contain a comma, because HTTP APIs and
// Function URLs join repeated header lines with commas. A request may
// repeat the header if every line carries the same key, on every event
// type. REST APIs and ALB pass the lines apart. HTTP APIs and Function
// URLs join them with commas. There the joined value is split again at the
// commas outside quoted keys. Different keys are refused.
//
// The record of a key is found by hashing [scope, key] (see [WithScope]
// and [WithRequestScope]), so two callers never share a record. The
// request's fingerprint is the hash of its method, path, query string
// parameters and body. The body is base64-decoded when the event says it
// is encoded. Any headers named with [WithFingerprintHeaders] are hashed
// too. These two hashes are all that is stored of a request. Its headers
// are never stored, and neither is Authorization. [Middleware] reads the
// body of a request with a key whole, at most [WithMaxBodySize] bytes. It
// fingerprints the body and gives it to the handler unchanged.
//
// # Answers
//
// The adapter answers as follows. Its own answers are RFC 9457 problem
// details (Content-Type: application/problem+json, see [Problem]). Their
// type is one of the Problem... constants. The file docs/problems.md in
// the repository documents each for API clients.
//
//	Situation                                    Status  Problem type
//	method needs no key                          handler's answer, unchanged
//	key missing                                  400     missing-key (WithOptionalKey: the handler runs unprotected)
//	key empty, too long, control characters,     400     invalid-key
//	  malformed, or several different keys
//	scope function reports ErrNoScope            400     missing-scope
//	first request with the key                   handler's response
//	retry after completion                       stored response, byte for byte, plus Idempotent-Replayed: true
//	retry while the first is in progress         409     key-in-use, with Retry-After
//	retry of a key held for an operator          409     key-held, without Retry-After
//	  (idempotency.WithHoldUntilReleased)
//	retry with a different fingerprint           422     key-reused
//	store failed before the handler ran          503     store-unavailable, with Retry-After: 1
//	handler returned a Go error or panicked      500     handler-failed (WithReturnErrors: the error, or the panic)
//	retry of a key whose error was recorded      500     recorded-error (WithReturnErrors: the error)
//	retry of a key whose response was too large  500     response-not-stored
//	  or streamed or hijacked (Middleware)
//	retry whose stored response cannot be read   500     replay-failed
//	body above WithMaxBodySize (Middleware)      413     body-too-large
//	body not sent whole (Middleware)             400     about:blank
//	handler panicked after it began to write     the connection is cut (http.ErrAbortHandler)
//	  (Middleware)
//
// Retry-After on 409 estimates when the first request will have finished.
// It is how long the handler has taken recently, in whole seconds rounded
// up. It is at least 1 and at most 2 seconds (see [WithMaxRetryAfter]). It
// is never more than the time until the first request's reservation
// lapses. A retry then usually gets the first request's response. One that
// comes too early gets another 409.
//
// Store failures get 503 rather than 500, because nothing happened. A
// retry with the same key is safe and likely to succeed.
//
// # Which responses are stored
//
// A response is stored when it says that the request executed. It is then
// replayed to every retry with its key until the key expires. Keys expire
// after [DefaultExpiry], 24 hours, unless [idempotency.WithExpiry] sets
// another time. Responses that say the request did not execute are
// returned but not stored, and the key is released. The client can then
// fix the cause and retry with the same key. Likewise, Stripe saves a
// result only once the endpoint has started executing.
//
//	Status                   Stored  Why
//	2xx, 3xx                 yes     the request executed
//	400, 402, 404, 422, ...  yes     an answer about the request; a retry gets the same one
//	401, 403                 no      the credentials may be fixed, then retried
//	408                      no      the request did not arrive whole
//	409                      no      the resource was busy; retry later
//	425                      no      retry once the connection is secure
//	429                      no      throttled; retry later
//	5xx                      no      the request may not have run (WithStoreServerErrors stores them, as Stripe does)
//
// A handler marks any other response as not executed with
// [idempotency.MarkNotExecuted]. An example is a 400 from validation that
// ran before the side effect. A Go error or a panic of the handler
// releases the key too. [idempotency.Permanent] and
// [idempotency.WithPermanentErrors] record a Go error instead. Retries
// receive it as recorded-error. A classifier given with
// [idempotency.WithPermanentErrors] sees the handler's Go errors only. A
// response is never an error.
//
// The stored form is the response itself, as JSON. It holds the status
// code, headers, multi-value headers, cookies, body, isBase64Encoded and
// ALB's status description. A replay returns it unchanged, with the
// Idempotent-Replayed header added to the header map the event type uses.
// The first response is the handler's own. So it carries the same headers
// as the replays, except Idempotent-Replayed. Responses are stored as they
// are, Set-Cookie included. When responses carry a caller's secrets, scope
// keys by caller ([WithScope]). The draft's security considerations advise
// this.
//
// [Middleware] stores its responses in the same form. It keeps the status,
// the headers the handler set (in multiValueHeaders) and the trailers. It
// keeps the body too, base64-encoded when it is not UTF-8. A response that
// cannot be recorded whole is not replayed. This happens when the handler
// flushes it (streaming) or hijacks the connection. The key then completes
// without the response. Retries get response-not-stored, never part of a
// response.
//
// # net/http servers
//
// [Middleware] answers as the table above says, with the same rules. It
// also has rules of its own, described below. It works for any Go HTTP
// server, such as those on ECS, EKS, App Runner and Lambda Web Adapter.
// Chi, gorilla/mux and echo take the same func(http.Handler) http.Handler.
// Without [idempotency.WithKeyPrefix], its prefix is "http".
//
// It takes the options of kind [idempotency.MiddlewareOption]. These are
// this package's options, with [WithRequestScope] and [WithMaxBodySize] of
// its own. They are also the core's options, except two kinds. The options
// that select keys from typed inputs are refused. So is
// [idempotency.WithTransactions], since the response goes to the client as
// the handler writes it, before a commit could fail.
//
// The body of a request that carries a key is read whole and
// fingerprinted. It is read up to [WithMaxBodySize] bytes. A larger body
// is answered 413 with [ProblemBodyTooLarge]. The handler gets the body
// unchanged, as Body and GetBody.
//
// The handler writes to a ResponseWriter. The writer sends the response as
// the handler writes it, and records its status, headers, body and
// trailers. It records the headers the handler sets. It does not record
// those that handlers around the middleware set before it ran, which
// belong to each response. The writer implements Unwrap, so
// http.ResponseController reaches the server's writer.
//
// A response that cannot be recorded whole is not replayed. This happens
// when the handler flushes (streaming) or hijacks the connection (a
// protocol upgrade). The request has executed, so its key is completed
// without the response. Retries get 500 with [ProblemResponseNotStored].
//
// A handler that panics releases the key. If it had written nothing, it is
// answered 500 with [ProblemHandlerFailed]. That answer has the headers
// the response had before the handler ran. Otherwise its connection is
// aborted (http.ErrAbortHandler), so that the client does not take a part
// for the whole. [WithReturnErrors] lets the panic go on to a recovery
// middleware instead.
//
// Servers give requests no deadline, so a reservation is a lease. The
// lease lasts 30 seconds and is renewed while the handler runs.
// [idempotency.WithLease] sets its length. A handler that runs for minutes
// keeps its key. The key of a server that dies is free within one lease. A
// deadline in the request's context bounds the lease, as on Lambda.
//
// The handler's context is the request's, which net/http cancels when the
// client goes away. A side effect that must finish even then should be
// detached from it (context.WithoutCancel). The client's retry will ask for
// its result.
//
// When POWERTOOLS_IDEMPOTENCY_DISABLED is true, [Middleware] returns the
// handler itself.
//
// # Clients
//
// Package [github.com/retrysafe/retrysafe/idempotency/httpclient] retries
// requests with the same key when the answer was lost. It also retries
// after a 409 (key-in-use), 429, 502, 503 or 504, waiting for their
// Retry-After. It keeps its retries within half of the server's window (24
// hours by default). It tells whether an answer was a replay.
package httpapi
