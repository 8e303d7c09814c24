package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A REST event can carry one header under two spellings; their values
// count as several lines.
func TestKeyUnderTwoSpellings(t *testing.T) {
	h := idempotency.Must(httpapi.WrapAPIGateway(restHandler, memory.New()))
	req := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/",
		Headers: map[string]string{"Idempotency-Key": "k1", "idempotency-key": "k2"}}
	resp, err := h(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, resp.Body, "several different keys")

	req.Headers["idempotency-key"] = "k1"
	resp, err = h(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
}

func TestScopeFunctionFailures(t *testing.T) {
	errDirectory := errors.New("directory unavailable")
	forEachEventType(t, func(t *testing.T, et eventType) {
		t.Run("empty scope", func(t *testing.T) {
			var a app
			send := et.wrap(t, a.handle, memory.New(), idempotency.WithLogger(discard()),
				httpapi.WithScope(func(context.Context, *httpapi.Request) (string, error) { return "", nil }))
			resp, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Equal(t, http.StatusBadRequest, resp.status)
			assert.Equal(t, httpapi.ProblemMissingScope, problemOf(t, resp).Type)
			assert.Zero(t, a.count())
		})
		t.Run("error", func(t *testing.T) {
			var a app
			failing := httpapi.WithScope(func(context.Context, *httpapi.Request) (string, error) { return "", errDirectory })
			send := et.wrap(t, a.handle, memory.New(), idempotency.WithLogger(discard()), failing)
			resp, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Equal(t, http.StatusInternalServerError, resp.status)
			assert.Equal(t, httpapi.ProblemHandlerFailed, problemOf(t, resp).Type)

			if et.handler {
				return // an http.Handler has no error to return
			}
			send = et.wrap(t, a.handle, memory.New(), httpapi.WithReturnErrors(), failing)
			_, err = send(t.Context(), post("k1", orderA))
			assert.Same(t, errDirectory, err)
			assert.Zero(t, a.count())
		})
	})
}

// Statuses that are not final HTTP statuses are never stored.
func TestInvalidStatusReleases(t *testing.T) {
	forEachEventType(t, func(t *testing.T, et eventType) {
		if et.handler {
			t.Skip("net/http refuses a status code that is not one")
		}
		a := app{respond: func(run int, _ httpReq) (httpResp, error) {
			return httpResp{status: 0, headers: http.Header{}}, nil
		}}
		send := et.wrap(t, a.handle, memory.New())
		for range 2 {
			resp, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Zero(t, resp.status)
		}
		assert.Equal(t, 2, a.count())
	})
}

// A classifier of permanent errors sees the handler's Go errors only: a
// released 5xx response is not an error, even to a classifier that takes
// every error for permanent.
func TestClassifierDoesNotSeeReleasedResponses(t *testing.T) {
	a := app{respond: func(run int, _ httpReq) (httpResp, error) { return status(http.StatusServiceUnavailable, "down"), nil }}
	var seen []error
	send := wrapV2(t, a.handle, memory.New(),
		idempotency.WithPermanentErrors(func(err error) bool { seen = append(seen, err); return true }))
	for range 2 {
		resp, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.status)
	}
	assert.Equal(t, 2, a.count(), "released, and run again")
	assert.Empty(t, seen)
}

// A recorded error decoded by the Guard's error decoder is answered as a
// recorded error, or returned with WithReturnErrors.
func TestErrorDecoder(t *testing.T) {
	decode := idempotency.WithErrorDecoder(func(se *idempotency.RecordedError) error { return errors.New("decoded: " + se.Message) })
	a := app{respond: func(int, httpReq) (httpResp, error) { return httpResp{}, idempotency.Permanent(errDeclined) }}
	send := wrapV2(t, a.handle, memory.New(), idempotency.WithLogger(discard()), decode)
	_, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, httpapi.ProblemRecordedError, problemOf(t, resp).Type)

	send = wrapV2(t, a.handle, memory.New(), httpapi.WithReturnErrors(), decode)
	_, err = send(t.Context(), post("k1", orderA))
	require.ErrorIs(t, err, errDeclined)
	_, err = send(t.Context(), post("k1", orderA))
	assert.EqualError(t, err, "decoded: card declined")
}
