package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/retrysafe/retrysafe/internal/httpkey"
)

// ContentTypeProblem is the media type of the responses the adapter makes
// itself: RFC 9457 problem details.
const ContentTypeProblem = "application/problem+json"

// The problem types of the responses the adapter makes itself, the "type"
// member of their Problem bodies. They are stable: clients may match on
// them. docs/problems.md in the repository, where the URIs lead, says when
// each happens and what a client should do.
const (
	// ProblemMissingKey (400): the method needs an idempotency key and the
	// request has none.
	ProblemMissingKey = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#missing-key"
	// ProblemInvalidKey (400): the key is empty, longer than MaxKeyLength,
	// contains control characters, is malformed, or the request carries
	// several different keys.
	ProblemInvalidKey = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-key"
	// ProblemMissingScope (400): the scope function found nothing
	// identifying the caller (ErrNoScope).
	ProblemMissingScope = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#missing-scope"
	// ProblemKeyInUse (409, with Retry-After): a request with the same key
	// is still being processed.
	ProblemKeyInUse = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#key-in-use"
	// ProblemKeyHeld (409, without Retry-After): the request that first
	// used the key ended without an outcome. The API holds the key until an
	// operator checks what happened and releases it
	// ([idempotency.WithHoldUntilReleased]).
	ProblemKeyHeld = httpkey.ProblemKeyHeld
	// ProblemKeyReused (422): the key was used before for a different
	// request (method, path, query, body or fingerprinted headers differ).
	ProblemKeyReused = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#key-reused"
	// ProblemStoreUnavailable (503, with Retry-After): the idempotency store
	// failed before the handler ran. Nothing happened.
	ProblemStoreUnavailable = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#store-unavailable"
	// ProblemNotCommitted (503, with Retry-After): the handler's staged
	// writes could not be committed with its result
	// ([idempotency.WithTransactions], *[idempotency.CommitError]). Nothing
	// of the request was written. Rarely, whether it was is not known yet.
	ProblemNotCommitted = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#not-committed"
	// ProblemHandlerFailed (500): the handler returned a Go error or
	// panicked. The key was released.
	ProblemHandlerFailed = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#handler-failed"
	// ProblemRecordedError (500): an earlier request with the key failed
	// with an error recorded as permanent, which every retry receives.
	ProblemRecordedError = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#recorded-error"
	// ProblemResponseNotStored (500): an earlier request with the key
	// completed, but its response was not stored. It was too large for the
	// store. Or [Middleware]'s handler streamed it or took the connection
	// over, so it was not recorded.
	ProblemResponseNotStored = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#response-not-stored"
	// ProblemReplayFailed (500): an earlier request with the key completed,
	// but its stored response cannot be decoded.
	ProblemReplayFailed = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#replay-failed"
	// ProblemBodyTooLarge (413, [Middleware] only): the request body is
	// larger than the middleware reads ([WithMaxBodySize]). Nothing happened.
	ProblemBodyTooLarge = "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#body-too-large"
)

// Problem is the body of the responses the adapter makes itself, an RFC
// 9457 problem details object. Decode it from responses whose Content-Type
// is ContentTypeProblem.
type Problem struct {
	// Type is one of the Problem... constants.
	Type string `json:"type"`
	// Title is a short summary of the problem type; it does not change from
	// one occurrence to the next.
	Title string `json:"title"`
	// Status is the HTTP status code of the response.
	Status int `json:"status"`
	// Detail explains this occurrence and what the client can do.
	Detail string `json:"detail,omitempty"`
}

// problemKind is a problem type with its fixed title and status.
type problemKind struct {
	typ    string
	title  string
	status int
}

var (
	missingKey       = problemKind{ProblemMissingKey, "Idempotency key required", http.StatusBadRequest}
	invalidKey       = problemKind{ProblemInvalidKey, "Invalid idempotency key", http.StatusBadRequest}
	missingScope     = problemKind{ProblemMissingScope, "Caller not identified", http.StatusBadRequest}
	keyInUse         = problemKind{ProblemKeyInUse, "Request with this idempotency key in progress", http.StatusConflict}
	keyHeld          = problemKind{ProblemKeyHeld, "Request with this idempotency key held for an operator", http.StatusConflict}
	keyReused        = problemKind{ProblemKeyReused, "Idempotency key reused for a different request", http.StatusUnprocessableEntity}
	storeUnavailable = problemKind{ProblemStoreUnavailable, "Idempotency store unavailable", http.StatusServiceUnavailable}
	notCommitted     = problemKind{ProblemNotCommitted, "Request not committed", http.StatusServiceUnavailable}
	// notCommittable is ProblemNotCommitted when the store cannot run
	// transactions at all: no retry helps.
	notCommittable    = problemKind{ProblemNotCommitted, "Request not committed", http.StatusInternalServerError}
	handlerFailed     = problemKind{ProblemHandlerFailed, "Request failed", http.StatusInternalServerError}
	recordedError     = problemKind{ProblemRecordedError, "Request failed permanently", http.StatusInternalServerError}
	responseNotStored = problemKind{ProblemResponseNotStored, "Response not available", http.StatusInternalServerError}
	replayFailed      = problemKind{ProblemReplayFailed, "Stored response unreadable", http.StatusInternalServerError}
	bodyTooLarge      = problemKind{ProblemBodyTooLarge, "Request body too large", http.StatusRequestEntityTooLarge}
	// bodyUnreadable answers a body that the client did not send whole: a
	// failure of the connection rather than of the key, for which RFC 9457
	// has the generic type.
	bodyUnreadable = problemKind{"about:blank", http.StatusText(http.StatusBadRequest), http.StatusBadRequest}
)

// storeRetryAfter is the Retry-After of ProblemStoreUnavailable, in
// seconds: store failures are mostly throttling and brief outages, and the
// retry costs one conditional write.
const storeRetryAfter = 1

// problem returns the response for a problem of kind k. retryAfter, in
// seconds, adds a Retry-After header when positive. Headers go where the
// event type wants them (see Request.multiValueResponse).
func problem(r *Request, k problemKind, detail string, retryAfter int) response {
	body, _ := json.Marshal(Problem{Type: k.typ, Title: k.title, Status: k.status, Detail: detail}) // strings and an int: cannot fail
	resp := response{
		StatusCode:        k.status,
		StatusDescription: strconv.Itoa(k.status) + " " + http.StatusText(k.status),
		Body:              string(body),
	}
	resp.setHeader(r, "Content-Type", ContentTypeProblem)
	if retryAfter > 0 {
		resp.setHeader(r, "Retry-After", strconv.Itoa(retryAfter))
	}
	return resp
}

// detail returns the detail of the problems whose detail does not depend
// on the request.
func (c *config) detail(k problemKind) string {
	h := c.header
	switch k {
	case missingScope:
		return "The request does not identify its caller, which this API requires for requests with the " + h + " header."
	case keyInUse:
		return "A request with the same " + h + " is still being processed. Retry after the delay in Retry-After to get its response."
	case keyHeld:
		return "A request with the same " + h + " ended without an outcome, and whether it took effect is not known. " +
			"The key is held until an operator checks and releases it: do not retry with this key, and contact the API's operator."
	case keyReused:
		parts := "method, path, query or body"
		if len(c.fingerprintHeaders) > 0 {
			parts = "method, path, query, body or headers " + strings.Join(c.fingerprintHeaders, ", ")
		}
		return "The " + h + " was already used for a request that differs from this one (" + parts + "). Use a new key for a new request."
	case notCommitted:
		return "The request's writes could not be committed with its result, so nothing of it was written (or, rarely, whether it was is not known yet). Retry it with the same " + h +
			": it runs again, or gets the result if it was committed."
	case notCommittable:
		return "The request's writes cannot be committed with its result: the API's idempotency store does not run transactions. Nothing of it was written. Retrying will not help until the API's configuration changes."
	case storeUnavailable:
		return "The request was not processed: its " + h + " could not be checked. Retry it with the same key."
	case handlerFailed:
		return "The request failed. Retry it with the same " + h +
			": it runs again, unless the API recorded the failure as final, in which case the retry reports it."
	case recordedError:
		return "A request with the same " + h + " failed in a way that must not be retried, and the failure was recorded. " +
			"Check the state of the resource, and use a new key for a new request."
	case responseNotStored:
		return "A request with the same " + h + " was processed, but its response was too large to keep and cannot be sent again. " +
			"Check the state of the resource instead of retrying, and use a new key for a new request."
	case replayFailed:
		return "A request with the same " + h + " was processed, but its stored response cannot be read. " +
			"Check the state of the resource instead of retrying, and use a new key for a new request."
	}
	return ""
}
