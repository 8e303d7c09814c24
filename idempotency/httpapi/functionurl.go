package httpapi

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// FunctionURLHandler is a handler of Lambda Function URL events.
type FunctionURLHandler = func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)

// WrapFunctionURL returns h with Idempotency-Key semantics, for Lambda
// Function URLs (invoke mode BUFFERED). The package documentation describes
// what it answers. Function URLs join repeated request headers with commas;
// response cookies are stored and replayed with the response.
//
// It fails if h or store is nil or an option is invalid. When
// POWERTOOLS_IDEMPOTENCY_DISABLED is true it only calls h (after
// checking the options), whose errors reach the caller as h returns them,
// without idempotency.Permanent's mark.
func WrapFunctionURL(h FunctionURLHandler, store persistence.Store, opts ...idempotency.HandlerOption) (FunctionURLHandler, error) {
	return wrap(functionURLBinding, h, store, opts)
}

var functionURLBinding = &binding[events.LambdaFunctionURLRequest, events.LambdaFunctionURLResponse]{
	name: "WrapFunctionURL",
	view: func(ev *events.LambdaFunctionURLRequest) Request {
		return Request{
			Method:  strings.ToUpper(ev.RequestContext.HTTP.Method),
			Path:    rawPath(ev.RawPath, ev.RequestContext.HTTP.Path),
			Event:   ev,
			headers: ev.Headers,
			query:   ev.QueryStringParameters,
			body:    ev.Body,
			base64:  ev.IsBase64Encoded,
		}
	},
	save: func(r *events.LambdaFunctionURLResponse) response {
		return response{
			StatusCode:      r.StatusCode,
			Headers:         r.Headers,
			Cookies:         r.Cookies,
			Body:            r.Body,
			IsBase64Encoded: r.IsBase64Encoded,
		}
	},
	load: func(r *response) events.LambdaFunctionURLResponse {
		return events.LambdaFunctionURLResponse{
			StatusCode:      r.StatusCode,
			Headers:         r.Headers,
			Cookies:         r.Cookies,
			Body:            r.Body,
			IsBase64Encoded: r.IsBase64Encoded,
		}
	},
}
