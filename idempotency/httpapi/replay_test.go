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
		h := idempotency.Must(httpapi.WrapAPIGateway(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return want, nil
		}, memory.New()))
		req := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/", Headers: map[string]string{"Idempotency-Key": "k"}}
		first, err := h(t.Context(), req)
		require.NoError(t, err)
		replay, err := h(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, want, first)
		assert.Equal(t, "true", replay.Headers[httpapi.HeaderReplayed])
		delete(replay.Headers, httpapi.HeaderReplayed)
		assertSameJSON(t, first, replay)
	})
	t.Run("HTTPv2", func(t *testing.T) {
		want := events.APIGatewayV2HTTPResponse{
			StatusCode: 200,
			Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
			Cookies:    []string{"a=1; Path=/", "b=2"},
			Body:       richBody,
		}
		h := idempotency.Must(httpapi.WrapAPIGatewayV2(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return want, nil
		}, memory.New()))
		req := events.APIGatewayV2HTTPRequest{RawPath: "/", Headers: map[string]string{"idempotency-key": "k"}}
		req.RequestContext.HTTP.Method = "POST"
		first, err := h(t.Context(), req)
		require.NoError(t, err)
		replay, err := h(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, want, first)
		assert.Equal(t, "true", replay.Headers[httpapi.HeaderReplayed])
		delete(replay.Headers, httpapi.HeaderReplayed)
		assertSameJSON(t, first, replay)
	})
	t.Run("FunctionURL", func(t *testing.T) {
		want := events.LambdaFunctionURLResponse{
			StatusCode:      200,
			Headers:         map[string]string{"Content-Type": "application/pdf"},
			Cookies:         []string{"download=1"},
			Body:            "JVBERi0xLjcKJcfsj6IK",
			IsBase64Encoded: true,
		}
		h := idempotency.Must(httpapi.WrapFunctionURL(func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
			return want, nil
		}, memory.New()))
		req := events.LambdaFunctionURLRequest{RawPath: "/", Headers: map[string]string{"idempotency-key": "k"}}
		req.RequestContext.HTTP.Method = "PATCH"
		first, err := h(t.Context(), req)
		require.NoError(t, err)
		replay, err := h(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, want, first)
		assert.Equal(t, "true", replay.Headers[httpapi.HeaderReplayed])
		delete(replay.Headers, httpapi.HeaderReplayed)
		assertSameJSON(t, first, replay)
	})
	t.Run("ALB", func(t *testing.T) {
		want := events.ALBTargetGroupResponse{
			StatusCode:        201,
			StatusDescription: "201 Created",
			Headers:           map[string]string{"Content-Type": "text/html"},
			Body:              "<p>created</p>",
		}
		h := idempotency.Must(httpapi.WrapALB(func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			return want, nil
		}, memory.New()))
		req := events.ALBTargetGroupRequest{HTTPMethod: "POST", Path: "/", Headers: map[string]string{"idempotency-key": "k"}}
		first, err := h(t.Context(), req)
		require.NoError(t, err)
		replay, err := h(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, want, first)
		assert.Equal(t, "true", replay.Headers[httpapi.HeaderReplayed])
		delete(replay.Headers, httpapi.HeaderReplayed)
		assertSameJSON(t, first, replay)
	})
}

func assertSameJSON(t *testing.T, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	assert.Equal(t, string(w), string(g))
}
