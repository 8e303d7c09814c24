package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// recorded runs event through an adapter (made by wrap) over a memory
// store, with a handler that answers resp, and returns the key the handler
// saw and the payload hash of the record it left.
func recorded[Req, Resp any](t *testing.T, wrap func(func(context.Context, Req) (Resp, error), *memory.Store) (func(context.Context, Req) (Resp, error), error), event Req, resp Resp) (key, payloadHash string) {
	t.Helper()
	store := memory.New()
	h, err := wrap(func(ctx context.Context, _ Req) (Resp, error) {
		key, _ = idempotency.KeyFromContext(ctx)
		return resp, nil
	}, store)
	require.NoError(t, err)
	_, err = h(context.Background(), event)
	require.NoError(t, err)
	require.NotEmpty(t, key, "the handler did not run with a key")
	rec, err := store.Get(context.Background(), key)
	require.NoError(t, err)
	return key, rec.PayloadHash
}

func TestRecordKeyIsTheAdaptersKey(t *testing.T) {
	opts := []any{
		idempotency.WithKeyPrefix("payments"),
		httpapi.WithHeader("X-Request-Key"),
		httpapi.WithFingerprintHeaders("X-Api-Version"),
		httpapi.WithScope(httpapi.ScopeHeader("X-Tenant")),
	}
	headers := map[string]string{"x-request-key": `"k-1"`, "X-Api-Version": "3", "X-Tenant": "acme"}
	check := func(t *testing.T, event any, key, hash string) {
		t.Helper()
		gotKey, gotHash, err := httpapi.RecordKey(context.Background(), event, as[idempotency.HandlerOption](opts)...)
		require.NoError(t, err)
		require.Equal(t, key, gotKey)
		require.Equal(t, hash, gotHash)
	}

	t.Run("REST", func(t *testing.T) {
		ev := loadEvent[events.APIGatewayProxyRequest](t, "apigw-request.json")
		ev.Headers, ev.MultiValueHeaders = headers, nil
		key, hash := recorded(t, func(h httpapi.APIGatewayHandler, s *memory.Store) (httpapi.APIGatewayHandler, error) {
			return httpapi.WrapAPIGateway(h, s, as[idempotency.HandlerOption](opts)...)
		}, ev, events.APIGatewayProxyResponse{StatusCode: 201})
		check(t, &ev, key, hash)
	})
	t.Run("HTTPv2", func(t *testing.T) {
		ev := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-no-authorizer.json")
		ev.RequestContext.HTTP.Method, ev.Headers = "POST", headers
		key, hash := recorded(t, func(h httpapi.APIGatewayV2Handler, s *memory.Store) (httpapi.APIGatewayV2Handler, error) {
			return httpapi.WrapAPIGatewayV2(h, s, as[idempotency.HandlerOption](opts)...)
		}, ev, events.APIGatewayV2HTTPResponse{StatusCode: 201})
		check(t, &ev, key, hash)
	})
	t.Run("FunctionURL", func(t *testing.T) {
		ev := loadEvent[events.LambdaFunctionURLRequest](t, "lambda-urls-request.json")
		ev.Headers = headers
		key, hash := recorded(t, func(h httpapi.FunctionURLHandler, s *memory.Store) (httpapi.FunctionURLHandler, error) {
			return httpapi.WrapFunctionURL(h, s, as[idempotency.HandlerOption](opts)...)
		}, ev, events.LambdaFunctionURLResponse{StatusCode: 201})
		check(t, &ev, key, hash)
	})
	t.Run("ALB", func(t *testing.T) {
		ev := loadEvent[events.ALBTargetGroupRequest](t, "alb-lambda-target-request-headers-only.json")
		ev.HTTPMethod, ev.Headers = "POST", headers
		key, hash := recorded(t, func(h httpapi.ALBHandler, s *memory.Store) (httpapi.ALBHandler, error) {
			return httpapi.WrapALB(h, s, as[idempotency.HandlerOption](opts)...)
		}, ev, events.ALBTargetGroupResponse{StatusCode: 201})
		check(t, &ev, key, hash)
	})
}

func TestRecordKeyOfRequestsWithoutARecord(t *testing.T) {
	post := func(headers map[string]string) *events.APIGatewayV2HTTPRequest {
		ev := &events.APIGatewayV2HTTPRequest{RawPath: "/orders", Headers: headers}
		ev.RequestContext.HTTP.Method = "POST"
		return ev
	}
	get := post(map[string]string{"Idempotency-Key": "k"})
	get.RequestContext.HTTP.Method = "GET"
	prefix := idempotency.WithKeyPrefix("orders")
	for _, tc := range []struct {
		name    string
		event   any
		opts    []any
		noKey   bool
		noScope bool
		want    string
	}{
		{"method without keys", get, nil, true, false, "GET requests need no Idempotency-Key"},
		{"no header", post(nil), nil, true, false, "answer 400 (Idempotency key required)"},
		{"optional header", post(nil), []any{httpapi.WithOptionalKey()}, true, false, "run it without a record"},
		{"invalid header", post(map[string]string{"Idempotency-Key": `"open`}), nil, true, false, "without its closing quote"},
		{"no caller", post(map[string]string{"Idempotency-Key": "k"}), []any{httpapi.WithScope(httpapi.ScopePrincipal())}, true, true, "answer 400 (Caller not identified)"},
		{"scope failure", post(map[string]string{"Idempotency-Key": "k"}), []any{httpapi.WithScope(func(context.Context, *httpapi.Request) (string, error) {
			return "", errors.New("directory unavailable")
		})}, false, false, "scope function: directory unavailable"},
		{"not an HTTP event", &events.SQSMessage{}, nil, false, false, "*events.SQSMessage is not an HTTP request event"},
		{"value, not pointer", events.APIGatewayV2HTTPRequest{}, nil, false, false, "events.APIGatewayV2HTTPRequest is not an HTTP request event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := httpapi.RecordKey(context.Background(), tc.event, as[idempotency.HandlerOption](append(tc.opts, prefix))...)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, tc.noKey, errors.Is(err, idempotency.ErrNoKey), "errors.Is(err, ErrNoKey): %v", err)
			require.Equal(t, tc.noScope, errors.Is(err, httpapi.ErrNoScope), "errors.Is(err, ErrNoScope): %v", err)
		})
	}
	_, _, err := httpapi.RecordKey(context.Background(), post(map[string]string{"Idempotency-Key": "k"}))
	require.ErrorContains(t, err, "no idempotency.WithKeyPrefix")
}

func ExampleRecordKey() {
	req := &events.APIGatewayV2HTTPRequest{
		RawPath: "/orders",
		Headers: map[string]string{"Idempotency-Key": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`},
		Body:    `{"item":"book"}`,
	}
	req.RequestContext.HTTP.Method = "POST"
	// The adapter's options, with its prefix: the record of this request
	// is under key in the store.
	key, payloadHash, err := httpapi.RecordKey(context.Background(), req, idempotency.WithKeyPrefix("orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(key)
	fmt.Println(payloadHash)
	// Output:
	// orders#a08543facb665b269496a3c6151080851982968a832c16c6fae8187d68fbd450
	// d6e1eea71af4aa0588a8de7f91fc50d1a3e98145d478fcd4cb8c9121ff9a8d79
}
