// Package httpapi gives HTTP APIs the Idempotency-Key semantics of the IETF
// draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header) and of Stripe, on AWS Lambda
// and on any Go HTTP server: a client sends a unique key with a request
// that must not happen twice, and every retry with that key gets the first
// request's response, or a clear HTTP answer (on Lambda, instead of a
// function error that API Gateway would turn into a 502).
//
// There is one adapter per Lambda event type: [WrapAPIGateway] (REST APIs,
// and HTTP APIs with payload format 1.0), [WrapAPIGatewayV2] (HTTP APIs),
// [WrapFunctionURL] and [WrapALB]. [Middleware] is the same for net/http
// servers (ECS, EKS, App Runner, Lambda Web Adapter; chi, gorilla/mux,
// echo). They run on an [idempotency.Guard], so the state machine and the
// store are those of package idempotency, and they take its options
// ([idempotency.WithExpiry], [idempotency.WithLogger], ...) next to their
// own ([WithScope], [WithHeader], ...):
//
//	lambda.Start(idempotency.Must(httpapi.WrapAPIGatewayV2(createOrder, store,
//		httpapi.WithScope(httpapi.ScopePrincipal()))))
//
//	idem := idempotency.Must(httpapi.Middleware(store, httpapi.WithRequestScope(callerOf)))
//	mux.Handle("POST /orders", idem(http.HandlerFunc(createOrder)))
//
// The options that select keys from typed inputs and shape typed results
// ([idempotency.WithKey], [idempotency.WithPayloadValidation],
// [idempotency.WithRequireKey], [idempotency.WithResponseHook]) are refused:
// the adapters derive keys from the Idempotency-Key header and fingerprint
// requests themselves. Without [idempotency.WithKeyPrefix] the prefix is
// the one [idempotency.Wrap] would give the wrapped handler, and for
// Middleware, which wraps handlers whose Go names say nothing stable,
// "http", after the function name and a dot behind Lambda Web Adapter.
//
// # Requests
//
// Only POST and PATCH requests need a key (see WithMethods); requests with
// other methods, which are idempotent by definition, reach the handler
// unchanged and so does its answer, whatever it is.
//
// The key is read from the Idempotency-Key header (see WithHeader), whose
// name is matched without regard to case. It may be a Structured Field
// string, as the draft specifies ("8e03978e-40d5-43e8-bc93-6894a57f9324"),
// or bare, as Stripe clients send it (8e03978e-40d5-43e8-bc93-6894a57f9324);
// both forms give the same key. Keys are 1 to MaxKeyLength characters of
// valid UTF-8 without control characters; a bare key cannot contain a comma,
// because HTTP APIs and Function URLs join repeated header lines with commas.
// A request may repeat the header if every line carries the same key, on
// every event type: REST APIs and ALB pass the lines apart, and on HTTP APIs
// and Function URLs, which join them with commas, the joined value is split
// again at the commas outside quoted keys. Different keys are refused.
//
// The record of a key is found by hashing [scope, key] (see WithScope and
// WithRequestScope), so two callers never share a record. The request's
// fingerprint is the hash of its method, path, query string parameters,
// body (base64-decoded when the event says it is encoded) and any headers
// named with WithFingerprintHeaders. These two hashes are all that is
// stored of a request: never its headers, never Authorization. Middleware
// reads the body of a request with a key whole, at most WithMaxBodySize
// bytes, to fingerprint it, and gives it to the handler unchanged.
//
// # Answers
//
// The adapter answers as follows. Its own answers are RFC 9457 problem
// details (Content-Type: application/problem+json, see Problem) whose type
// is one of the Problem... constants; docs/problems.md in the repository
// documents each for API clients.
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
// Retry-After on 409 is an estimate of when the first request will have
// finished: how long the handler has taken recently, in whole seconds
// rounded up, at least 1, at most 2 seconds (see
// WithMaxRetryAfter), and never more than the time until the first
// request's reservation lapses. A retry then usually gets the first
// request's response; one that comes too early gets another 409.
//
// 503 is chosen for store failures, rather than 500, because nothing
// happened and a retry with the same key is safe and likely to succeed.
//
// # Which responses are stored
//
// A response is stored, and replayed to every retry with its key until the
// key expires ([DefaultExpiry], 24 hours, unless idempotency.WithExpiry sets
// another), when it says that the request executed. Responses that say it
// did not are returned but not stored, and the key is released, so that
// the client can fix the cause and retry with the same key, as Stripe
// saves a result only once the endpoint has started executing:
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
// idempotency.MarkNotExecuted, for example a 400 from validation that ran
// before the side effect. A Go error or a panic of the handler releases
// the key too; idempotency.Permanent and idempotency.WithPermanentErrors
// record a Go error instead, which retries receive as recorded-error. A
// classifier given with [idempotency.WithPermanentErrors] sees the
// handler's Go errors only: a response is never an error.
//
// The stored form is the response itself: status code, headers,
// multi-value headers, cookies, body, isBase64Encoded and ALB's status
// description, as JSON. A replay returns it unchanged, with the
// Idempotent-Replayed header added to the header map the event type uses.
// The first response is the handler's own, so it carries the same headers
// as the replays, except Idempotent-Replayed. Responses are stored as they
// are, Set-Cookie included: when responses carry a caller's secrets, scope
// keys by caller (WithScope), as the draft's security considerations advise.
//
// Middleware stores its responses in the same form: status, the headers
// the handler set (in multiValueHeaders), the body (base64-encoded when it
// is not UTF-8) and the trailers. A response that cannot be recorded whole
// is not replayed: when the handler flushes it (streaming) or hijacks the
// connection, the key completes without it, and retries get
// response-not-stored, never part of a response.
//
// # net/http servers
//
// Middleware answers as the table above says, with the same rules, and
// these of its own, for any Go HTTP server (ECS, EKS, App Runner, Lambda
// Web Adapter; chi, gorilla/mux and echo take the same
// func(http.Handler) http.Handler). Without idempotency.WithKeyPrefix, its
// prefix is "http". It takes the options of kind
// idempotency.MiddlewareOption: this package's, WithRequestScope and
// WithMaxBodySize of its own, and the core's but those that select keys
// from typed inputs and idempotency.WithTransactions, since the response
// goes to the client as the handler writes it, before a commit could fail.
//
// The body of a request that carries a key is read whole (at most
// WithMaxBodySize bytes, else 413 with ProblemBodyTooLarge), fingerprinted,
// and given to the handler unchanged, as Body and GetBody. The handler
// writes to a ResponseWriter that sends its response as it writes it and
// records it, status, headers, body and trailers: the headers the handler
// sets, not those that handlers around the middleware set before it ran,
// which belong to each response. The writer implements Unwrap, so
// http.ResponseController reaches the server's writer.
//
// A response that cannot be recorded whole is not replayed: when the
// handler flushes (streaming), or hijacks the connection (a protocol
// upgrade), the request has executed, so its key is completed without the
// response, and retries get 500 with ProblemResponseNotStored. A handler
// that panics releases the key: it is answered 500 with
// ProblemHandlerFailed when it had written nothing, with the headers the
// response had before it ran, and otherwise its connection is aborted
// (http.ErrAbortHandler), so that the client does not take a part for the
// whole. WithReturnErrors lets the panic go on to a recovery middleware
// instead.
//
// Servers give requests no deadline, so a reservation is a lease
// (30 seconds, idempotency.WithLease) renewed while the handler runs
// (idempotency.WithLease sets it): a handler that runs for minutes keeps
// its key, and the key of a server that dies is free within one lease. A
// deadline in the request's context bounds the lease, as on Lambda. The
// handler's context is the request's, which net/http cancels when the
// client goes away: a side effect that must finish even then should be
// detached from it (context.WithoutCancel), since the client's retry will
// ask for its result. When POWERTOOLS_IDEMPOTENCY_DISABLED is true,
// Middleware returns the handler itself.
//
// # Clients
//
// Package [github.com/retrysafe/retrysafe/idempotency/httpclient] retries
// requests with the same key when the answer was lost, or is a 409
// (key-in-use), 429, 502, 503 or 504, after their Retry-After. It keeps
// its retries within half of the server's window (24 hours by default),
// and tells whether an answer was a replay.
package httpapi
