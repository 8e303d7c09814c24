package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/retrysafe/retrysafe/internal/httpkey"
)

// HeaderReplayed is the response header that marks a replayed response,
// Idempotent-Replayed, with the value "true", as Stripe does.
const HeaderReplayed = httpkey.HeaderReplayed

// response is what a replay needs of a response, whatever its type, and
// the form in which it is stored: the members of the Lambda proxy response
// formats, under their own names so that a stored record reads as what the
// function returned. Middleware's responses take the same form: their
// headers in multiValueHeaders, their body as text when it is UTF-8 and
// base64-encoded otherwise, and their trailers. Nothing of the request is
// kept.
type response struct {
	StatusCode int `json:"statusCode"`
	// StatusDescription is ALB's ("200 OK").
	StatusDescription string              `json:"statusDescription,omitempty"`
	Headers           map[string]string   `json:"headers,omitempty"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
	// Cookies are the Set-Cookie values of HTTP APIs and Function URLs.
	Cookies         []string `json:"cookies,omitempty"`
	Body            string   `json:"body,omitempty"`
	IsBase64Encoded bool     `json:"isBase64Encoded,omitempty"`
	// Trailers are the trailers of Middleware's responses.
	Trailers map[string][]string `json:"trailers,omitempty"`
	// NotReplayable, when set, says why the response was not recorded
	// (notReplayableStreamed, notReplayableHijacked): the request executed,
	// and retries get ProblemResponseNotStored.
	NotReplayable string `json:"notReplayable,omitempty"`
}

// Why a response of Middleware's was not recorded.
const (
	// notReplayableStreamed: the handler flushed the response while
	// writing it.
	notReplayableStreamed = "streamed"
	// notReplayableHijacked: the handler took the connection over.
	notReplayableHijacked = "hijacked"
)

// encode returns the stored form of resp: compact JSON without HTML
// escaping, which would only make bodies longer.
func (resp *response) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// decodeResponse reads a stored response.
func decodeResponse(data []byte) (response, error) {
	var resp response
	if err := json.Unmarshal(data, &resp); err != nil {
		return response{}, err
	}
	if resp.NotReplayable == "" && (resp.StatusCode < 100 || resp.StatusCode > 599) {
		return response{}, fmt.Errorf("stored status code %d is not an HTTP status", resp.StatusCode)
	}
	return resp, nil
}

// setHeader sets header name to value in the header map that r's event type
// reads, replacing any spelling of name the response already has. It must
// only be called on responses the adapter owns: it modifies their maps.
func (resp *response) setHeader(r *Request, name, value string) {
	for k := range resp.Headers {
		if strings.EqualFold(k, name) {
			delete(resp.Headers, k)
		}
	}
	for k := range resp.MultiValueHeaders {
		if strings.EqualFold(k, name) {
			delete(resp.MultiValueHeaders, k)
		}
	}
	if r.multiValueResponse {
		if resp.MultiValueHeaders == nil {
			resp.MultiValueHeaders = make(map[string][]string, 1)
		}
		resp.MultiValueHeaders[name] = []string{value}
		return
	}
	if resp.Headers == nil {
		resp.Headers = make(map[string]string, 1)
	}
	resp.Headers[name] = value
}

// stores reports whether a response with status code is stored and
// replayed, rather than released so that a retry runs the handler again.
// Responses that say the request did not execute are released (see
// notExecutedStatus); 5xx too, unless storeServerErrors. Codes that are not
// final HTTP statuses (0, 1xx, 600 and above) are never stored.
func stores(status int, storeServerErrors bool) bool {
	switch {
	case notExecutedStatus(status):
		return false
	case 200 <= status && status < 500:
		return true
	case 500 <= status && status < 600:
		return storeServerErrors
	}
	return false
}

// notExecutedStatus reports whether a response with status says that the
// request was refused before it executed, so that the client may fix what
// was wrong and retry with the same key, as Stripe saves results only once
// an endpoint has started executing:
//
//	401 Unauthorized, 403 Forbidden   the credentials may be fixed
//	408 Request Timeout               the request did not arrive whole
//	409 Conflict                      the resource was busy; retry later
//	425 Too Early                     retry once the connection is secure
//	429 Too Many Requests             throttled; retry later
func notExecutedStatus(status int) bool {
	switch status {
	case 401, 403, 408, 409, 425, 429:
		return true
	}
	return false
}
