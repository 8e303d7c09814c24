package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

const richBody = `{"name":"Zoë","html":"<b>&amp;</b>","emoji":"🧾","escaped":"\u2028"}`

// The replay, as the Lambda runtime encodes it, is the first response's
// encoding plus Idempotent-Replayed, and the first response is exactly what
// the handler returned.
func TestReplayIsByteIdentical(t *testing.T) {
	t.Run("REST", func(t *testing.T) {
		want := events.APIGatewayProxyResponse{
			StatusCode:        201,
			Headers:           map[string]string{"Content-Type": "application/json; charset=utf-8", "X-Request-Cost": "3"},
			MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1; Path=/", "b=2; Path=/; Secure"}, "Vary": {"Accept", "Origin"}},
			Body:              richBody,
		}
		req := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/", Headers: map[string]string{"Idempotency-Key": "k"}}
		h := idempotency.Must(httpapi.WrapAPIGateway(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return want, nil
		}, memory.New()))
		assertReplayIsByteIdentical(t, h, req, want, func(r events.APIGatewayProxyResponse) map[string]string { return r.Headers })
	})
	t.Run("HTTPv2", func(t *testing.T) {
		want := events.APIGatewayV2HTTPResponse{
			StatusCode: 200,
			Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
			Cookies:    []string{"a=1; Path=/", "b=2"},
			Body:       richBody,
		}
		req := events.APIGatewayV2HTTPRequest{RawPath: "/", Headers: map[string]string{"idempotency-key": "k"}}
		req.RequestContext.HTTP.Method = "POST"
		h := idempotency.Must(httpapi.WrapAPIGatewayV2(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return want, nil
		}, memory.New()))
		assertReplayIsByteIdentical(t, h, req, want, func(r events.APIGatewayV2HTTPResponse) map[string]string { return r.Headers })
	})
	t.Run("FunctionURL", func(t *testing.T) {
		want := events.LambdaFunctionURLResponse{
			StatusCode:      200,
			Headers:         map[string]string{"Content-Type": "application/pdf"},
			Cookies:         []string{"download=1"},
			Body:            "JVBERi0xLjcKJcfsj6IK",
			IsBase64Encoded: true,
		}
		req := events.LambdaFunctionURLRequest{RawPath: "/", Headers: map[string]string{"idempotency-key": "k"}}
		req.RequestContext.HTTP.Method = "PATCH"
		h := idempotency.Must(httpapi.WrapFunctionURL(func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
			return want, nil
		}, memory.New()))
		assertReplayIsByteIdentical(t, h, req, want, func(r events.LambdaFunctionURLResponse) map[string]string { return r.Headers })
	})
	t.Run("ALB", func(t *testing.T) {
		want := events.ALBTargetGroupResponse{
			StatusCode:        201,
			StatusDescription: "201 Created",
			Headers:           map[string]string{"Content-Type": "text/html"},
			Body:              "<p>created</p>",
		}
		req := events.ALBTargetGroupRequest{HTTPMethod: "POST", Path: "/", Headers: map[string]string{"idempotency-key": "k"}}
		h := idempotency.Must(httpapi.WrapALB(func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			return want, nil
		}, memory.New()))
		assertReplayIsByteIdentical(t, h, req, want, func(r events.ALBTargetGroupResponse) map[string]string { return r.Headers })
	})
}

// assertReplayIsByteIdentical calls h twice with req. The first answer
// must be want, exactly; the second, want's JSON encoding once
// headersOf's Idempotent-Replayed header is taken out.
func assertReplayIsByteIdentical[Req, Res any](t *testing.T, h func(context.Context, Req) (Res, error), req Req, want Res, headersOf func(Res) map[string]string) {
	t.Helper()
	first, err := h(t.Context(), req)
	require.NoError(t, err)
	replay, err := h(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, want, first)
	assert.Equal(t, "true", headersOf(replay)[httpapi.HeaderReplayed])
	delete(headersOf(replay), httpapi.HeaderReplayed)
	assertSameJSON(t, first, replay)
}

func assertSameJSON(t *testing.T, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	assert.Equal(t, string(w), string(g))
}
