package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A handler's steps run where the adapter runs it without the library:
// with POWERTOOLS_IDEMPOTENCY_DISABLED, and for a request without a key
// on a route where the key is optional.
func TestStepsRunWithoutTheLibrary(t *testing.T) {
	runs := 0
	h := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		n, err := idempotency.Step(ctx, "charge", func(context.Context) (int, error) { runs++; return runs, nil })
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: string(rune('0' + n))}, nil
	}
	req := events.APIGatewayV2HTTPRequest{Body: `{}`}
	req.RequestContext.HTTP.Method = http.MethodPost

	t.Run("optional key", func(t *testing.T) {
		send := idempotency.Must(httpapi.WrapAPIGatewayV2(h, memory.New(), httpapi.WithOptionalKey()))
		resp, err := send(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	})
	t.Run("disabled", func(t *testing.T) {
		t.Setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
		send := idempotency.Must(httpapi.WrapAPIGatewayV2(h, memory.New()))
		resp, err := send(t.Context(), req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.StatusCode, resp.Body)
	})
	assert.Equal(t, 2, runs)
}
