package httpapi

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// ALBHandler is a handler of Application Load Balancer target group events.
type ALBHandler = func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)

// WrapALB returns h with Idempotency-Key semantics, for Lambda targets of
// an Application Load Balancer. The package documentation describes what
// it answers.
//
// When the target group has multi-value headers on, the request carries
// multiValueHeaders. The load balancer then reads only the
// multiValueHeaders of the response, so the adapter puts the headers it
// adds there. Otherwise it puts them in headers. Its own responses carry a
// statusDescription such as "409 Conflict". Replays keep the handler's.
//
// It fails if h or store is nil or an option is invalid. When
// POWERTOOLS_IDEMPOTENCY_DISABLED is true, it only calls h, after checking
// the options. The errors of h then reach the caller as h returns them,
// without [idempotency.Permanent]'s mark.
func WrapALB(h ALBHandler, store persistence.Store, opts ...idempotency.HandlerOption) (ALBHandler, error) {
	return wrap(albBinding, h, store, opts)
}

var albBinding = &binding[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse]{
	name: "WrapALB",
	view: func(ev *events.ALBTargetGroupRequest) Request {
		return Request{
			Method:             strings.ToUpper(ev.HTTPMethod),
			Path:               ev.Path,
			Event:              ev,
			headers:            ev.Headers,
			multiHeaders:       ev.MultiValueHeaders,
			query:              ev.QueryStringParameters,
			multiQuery:         ev.MultiValueQueryStringParameters,
			body:               ev.Body,
			base64:             ev.IsBase64Encoded,
			multiValueResponse: ev.MultiValueHeaders != nil,
		}
	},
	save: func(r *events.ALBTargetGroupResponse) response {
		return response{
			StatusCode:        r.StatusCode,
			StatusDescription: r.StatusDescription,
			Headers:           r.Headers,
			MultiValueHeaders: r.MultiValueHeaders,
			Body:              r.Body,
			IsBase64Encoded:   r.IsBase64Encoded,
		}
	},
	load: func(r *response) events.ALBTargetGroupResponse {
		return events.ALBTargetGroupResponse{
			StatusCode:        r.StatusCode,
			StatusDescription: r.StatusDescription,
			Headers:           r.Headers,
			MultiValueHeaders: r.MultiValueHeaders,
			Body:              r.Body,
			IsBase64Encoded:   r.IsBase64Encoded,
		}
	},
}
