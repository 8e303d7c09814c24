// Package httpclient makes HTTP requests that must not happen twice safe
// to retry. It is the client side of the Idempotency-Key header of the
// IETF draft (draft-ietf-httpapi-idempotency-key-header) and of Stripe,
// and of the servers of package
// [github.com/retrysafe/retrysafe/idempotency/httpapi].
//
// [Transport] is an [http.RoundTripper]. It gives each POST and PATCH
// request an idempotency key. It sends the request again with the same
// key when the answer was lost or says to try again later. The server runs
// the request once and answers the retries with its stored response.
//
//	client := &http.Client{Transport: &httpclient.Transport{}}
//	resp, err := client.Post(url, "application/json", strings.NewReader(body))
//
// # Keys
//
// The key of a request is its own Idempotency-Key header when it has one,
// sent as the caller wrote it. Else it is the key that [WithKey] put in the
// request's context. Else it is a new random UUID from [NewKey]. Keep the
// key with the operation, such as in the database row of the order that
// the request creates. Pass it with WithKey. A process that restarts can
// then send the operation again with the same key. Keys are sent as the
// draft's quoted strings.
//
// # Retries
//
// Transport sends a request again, after a wait, when the answer says it
// is safe and useful:
//
//	Answer                                      Transport
//	connection error (refused, reset, closed)   retries after a backoff
//	502, 503, 504                               retries after Retry-After, or a backoff
//	409 (a request with the key in flight)      retries after Retry-After, or a backoff
//	409 key-held (an operator must release it)  returns the response
//	429                                         retries after Retry-After, or a backoff
//	a certificate that does not verify          returns the error
//	anything else (2xx, 400, 401, 403, 404,     returns the response
//	  422, 500, ...)
//	the request's context ends                  returns its error
//
// Retry-After is honoured as seconds or as an HTTP date, counted from the
// response's Date. The backoff is exponential with jitter. It starts at
// BaseDelay, doubles with each retry up to MaxDelay, and a random part of
// up to half of it is taken off.
//
// Attempts stop after MaxAttempts, or when the next one would start more
// than MaxElapsed after the first, or when the request's context ends. The
// last answer is then returned, its error or its response with the body
// unread. Choose the budget from what the caller can wait, well inside the
// server's key window (KeyWindow, how long the server remembers a key). A
// retry that arrives after the server forgot the key runs the request a
// second time. So Transport refuses a MaxElapsed of more than half the
// KeyWindow. That leaves room for what it does not see:
//   - the time a request takes to reach the server;
//   - clocks that differ;
//   - a server configured with a shorter window than the one it was told;
//   - a caller that retries the whole operation again with the same key
//     after its budget ran out.
//
// # Bodies and answers
//
// Bodies must be replayable. A request with a body and without GetBody
// fails with [ErrBodyNotReplayable], before anything is sent.
// [http.NewRequest] sets GetBody for *bytes.Buffer, *bytes.Reader and
// *strings.Reader bodies. Requests with other methods than POST and PATCH
// (see Methods) go to Base unchanged, and are not retried.
//
// [Replayed] reports whether an answer was a stored one, and [Attempts]
// how many attempts it took. net/http's own Transport sends a request with
// an Idempotency-Key header again by itself, once, when a kept-alive
// connection breaks before the answer begins. Attempts does not count
// those.
//
// The package does not depend on aws-lambda-go.
package httpclient
