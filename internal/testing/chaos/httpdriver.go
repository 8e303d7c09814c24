package chaos

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
)

// HTTPDriver tests the HTTP adapter (httpapi.WrapAPIGatewayV2): the request
// is the JSON body of a POST with the key in the Idempotency-Key header, and
// the client reads the HTTP answer as an API client would. With
// WithReturnErrors, the handler's errors and panics reach the harness as
// they would reach the Lambda runtime.
type HTTPDriver struct{}

// Name implements Driver.
func (HTTPDriver) Name() string { return "http" }

// Deploy implements Driver.
func (HTTPDriver) Deploy(env *Env, h Handler) (Invoke, error) {
	api := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		var req Request
		if err := json.Unmarshal([]byte(ev.Body), &req); err != nil {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest}, nil
		}
		resp, err := h(ctx, req)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		body, err := json.Marshal(resp)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{
			StatusCode: http.StatusCreated,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       string(body),
		}, nil
	}
	wrapped, err := httpapi.WrapAPIGatewayV2(api, env.Store,
		optionsAs[idempotency.HandlerOption](env.Options(), httpapi.WithReturnErrors(), idempotency.WithKeyPrefix("chaos.http"))...)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req Request) Outcome {
		body, err := json.Marshal(req)
		if err != nil {
			return Outcome{Retry: RetryUnexpected, Err: err}
		}
		ev := events.APIGatewayV2HTTPRequest{
			Version:  "2.0",
			RawPath:  "/charges",
			Headers:  map[string]string{"content-type": "application/json", "idempotency-key": req.Key},
			Body:     string(body),
			RouteKey: "POST /charges",
		}
		ev.RequestContext.HTTP.Method = http.MethodPost
		ev.RequestContext.HTTP.Path = "/charges"
		resp, err := wrapped(ctx, ev)
		if err != nil {
			return Classify(Response{}, err)
		}
		return httpOutcome(ctx, resp)
	}, nil
}

// httpOutcome reads an HTTP answer as a client does.
func httpOutcome(ctx context.Context, resp events.APIGatewayV2HTTPResponse) Outcome {
	retryAfter := func() time.Duration {
		s, err := strconv.Atoi(resp.Headers["Retry-After"])
		if err != nil || s < 1 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	switch resp.StatusCode {
	case http.StatusCreated:
		var r Response
		if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
			return Outcome{Retry: RetryUnexpected, Err: err}
		}
		out := Classify(r, nil)
		// The response of the invocation that ran is not marked; a replay
		// is.
		replayed := resp.Headers[httpapi.HeaderReplayed] == "true"
		if inv := invocationFrom(ctx); inv != nil && replayed == (r.Charge == inv.id) {
			out.Breach = "the " + httpapi.HeaderReplayed + " header is " + strconv.FormatBool(replayed) +
				" on the response of invocation " + r.Charge
		}
		return out
	case http.StatusConflict:
		return Outcome{Retry: RetryInProgress, RetryAfter: retryAfter(), Err: problemError(resp)}
	case http.StatusServiceUnavailable:
		return Outcome{Retry: RetryStoreError, RetryAfter: retryAfter(), Err: problemError(resp)}
	case http.StatusInternalServerError:
		var p httpapi.Problem
		if err := json.Unmarshal([]byte(resp.Body), &p); err == nil && p.Type == httpapi.ProblemResponseNotStored {
			return Outcome{Final: true, Answer: AnswerTooLarge, Err: problemError(resp)}
		}
	}
	return Outcome{Retry: RetryUnexpected, Err: problemError(resp)}
}

// httpError is an HTTP answer that is not a response of the handler.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return "HTTP " + strconv.Itoa(e.status) + ": " + e.body }

func problemError(resp events.APIGatewayV2HTTPResponse) error {
	return &httpError{status: resp.StatusCode, body: resp.Body}
}
