// Package httpapi gives Lambda handlers behind HTTP the Idempotency-Key
// semantics of the IETF draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header) and of Stripe: a client sends
// a unique key with a request that must not happen twice, and every retry
// with that key gets the first request's response, or a clear HTTP answer
// instead of a Lambda error that API Gateway would turn into a 502.
//
// There is one adapter per event type: WrapAPIGateway (REST APIs, and HTTP
// APIs with payload format 1.0), WrapAPIGatewayV2 (HTTP APIs), WrapFunctionURL
// and WrapALB, each with a Must form. They run on an idempotency.Guard, so
// the state machine, the store and the core options (WithIdempotencyOptions) are
// those of package idempotency.
//
//	handler := httpapi.MustWrapAPIGatewayV2(createOrder, store,
//		httpapi.WithScope(httpapi.ScopePrincipal()),
//		httpapi.WithIdempotencyOptions(idempotency.WithExpiry(24*time.Hour)))
//	lambda.Start(handler)
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
// Several header lines are accepted if they carry the same key.
//
// The record of a key is found by hashing [scope, key] (see WithScope), so
// two callers never share a record. The request's fingerprint is the hash of
// its method, path, query string parameters, body (base64-decoded when the
// event says it is encoded) and any headers named with
// WithFingerprintHeaders. These two hashes are
// all that is stored of a request: never its headers, never Authorization.
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
//	retry with a different fingerprint           422     key-reused
//	store failed before the handler ran          503     store-unavailable, with Retry-After: 1
//	handler returned a Go error or panicked      500     handler-failed (WithReturnErrors: the error, or the panic)
//	retry of a key whose error was recorded      500     recorded-error (WithReturnErrors: the error)
//	retry of a key whose response was too large  500     response-not-stored
//	retry whose stored response cannot be read   500     replay-failed
//
// Retry-After on 409 is the number of seconds until the first request's
// reservation lapses (its invocation's deadline, measured on the Guard's
// clock), rounded up, at least 1: by then that request has completed, and a
// retry gets its response, or its invocation has ended without completing,
// and a retry runs the handler.
//
// 503 is chosen for store failures, rather than 500, because nothing
// happened and a retry with the same key is safe and likely to succeed.
//
// # Which responses are stored
//
// Responses with status 2xx, 3xx and 4xx are stored and replayed, except 408
// and 429, which invite the client to retry. 5xx responses release the key,
// so that a retry runs the handler again, unless WithStoreServerErrors is
// set (Stripe's behaviour). A Go error or a panic of the handler releases
// the key too; idempotency.Permanent and idempotency.WithPermanentErrors
// record a Go error instead, which retries receive as recorded-error.
//
// The stored form is the response itself: status code, headers,
// multi-value headers, cookies, body, isBase64Encoded and ALB's status
// description, as JSON. A replay returns it unchanged, with the
// Idempotent-Replayed header added to the header map the event type uses.
// The first response is the handler's own, so it carries the same headers
// as the replays, except Idempotent-Replayed. Responses are stored as they
// are, Set-Cookie included: when responses carry a caller's secrets, scope
// keys by caller (WithScope), as the draft's security considerations advise.
package httpapi
