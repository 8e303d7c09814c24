package httpapi

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// APIGatewayHandler is a handler of API Gateway REST API events (the Lambda
// proxy integration), also used by HTTP APIs with payload format 1.0.
type APIGatewayHandler = func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// APIGatewayV2Handler is a handler of API Gateway HTTP API events (payload
// format 2.0).
type APIGatewayV2Handler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// WrapAPIGateway returns h with Idempotency-Key semantics, for API Gateway
// REST APIs and HTTP APIs with payload format 1.0. The package
// documentation describes what it answers. Headers are read from both
// headers and multiValueHeaders; the headers the adapter adds go to
// headers, which API Gateway merges with multiValueHeaders.
//
// It fails if h or store is nil or an option is invalid. When
// POWERTOOLS_IDEMPOTENCY_DISABLED is true it only calls h (after
// checking the options), whose errors reach the caller as h returns them,
// without idempotency.Permanent's mark.
func WrapAPIGateway(h APIGatewayHandler, store persistence.Store, opts ...idempotency.HandlerOption) (APIGatewayHandler, error) {
	return wrap(restBinding, h, store, opts)
}

// WrapAPIGatewayV2 returns h with Idempotency-Key semantics, for API
// Gateway HTTP APIs (payload format 2.0). The package documentation
// describes what it answers. HTTP APIs join repeated request headers with
// commas; response cookies are stored and replayed with the response.
//
// It fails if h or store is nil or an option is invalid. When
// POWERTOOLS_IDEMPOTENCY_DISABLED is true it only calls h (after
// checking the options), whose errors reach the caller as h returns them,
// without idempotency.Permanent's mark.
func WrapAPIGatewayV2(h APIGatewayV2Handler, store persistence.Store, opts ...idempotency.HandlerOption) (APIGatewayV2Handler, error) {
	return wrap(v2Binding, h, store, opts)
}

var restBinding = &binding[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
	name: "WrapAPIGateway",
	view: func(ev *events.APIGatewayProxyRequest) Request {
		return Request{
			Method:       strings.ToUpper(ev.HTTPMethod),
			Path:         ev.Path,
			Event:        ev,
			headers:      ev.Headers,
			multiHeaders: ev.MultiValueHeaders,
			query:        ev.QueryStringParameters,
			multiQuery:   ev.MultiValueQueryStringParameters,
			body:         ev.Body,
			base64:       ev.IsBase64Encoded,
		}
	},
	save: func(r *events.APIGatewayProxyResponse) response {
		return response{
			StatusCode:        r.StatusCode,
			Headers:           r.Headers,
			MultiValueHeaders: r.MultiValueHeaders,
			Body:              r.Body,
			IsBase64Encoded:   r.IsBase64Encoded,
		}
	},
	load: func(r *response) events.APIGatewayProxyResponse {
		return events.APIGatewayProxyResponse{
			StatusCode:        r.StatusCode,
			Headers:           r.Headers,
			MultiValueHeaders: r.MultiValueHeaders,
			Body:              r.Body,
			IsBase64Encoded:   r.IsBase64Encoded,
		}
	},
}

var v2Binding = &binding[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
	name: "WrapAPIGatewayV2",
	view: func(ev *events.APIGatewayV2HTTPRequest) Request {
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
	save: func(r *events.APIGatewayV2HTTPResponse) response {
		return response{
			StatusCode:        r.StatusCode,
			Headers:           r.Headers,
			MultiValueHeaders: r.MultiValueHeaders,
			Cookies:           r.Cookies,
			Body:              r.Body,
			IsBase64Encoded:   r.IsBase64Encoded,
		}
	},
	load: func(r *response) events.APIGatewayV2HTTPResponse {
		return events.APIGatewayV2HTTPResponse{
			StatusCode:        r.StatusCode,
			Headers:           r.Headers,
			MultiValueHeaders: r.MultiValueHeaders,
			Cookies:           r.Cookies,
			Body:              r.Body,
			IsBase64Encoded:   r.IsBase64Encoded,
		}
	},
}

// rawPath returns the request path of a payload 2.0 event: rawPath, or the
// path of its request context when rawPath is missing.
func rawPath(raw, path string) string {
	if raw != "" {
		return raw
	}
	return path
}
