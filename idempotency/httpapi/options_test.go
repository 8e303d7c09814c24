package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func restHandler(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return events.APIGatewayProxyResponse{StatusCode: 201}, nil
}

func v2Handler(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
}

func functionURLHandler(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return events.LambdaFunctionURLResponse{StatusCode: 201}, nil
}

func albHandler(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
	return events.ALBTargetGroupResponse{StatusCode: 201}, nil
}

// wrappers calls each Wrap function; nilHandler passes a nil handler.
var wrappers = map[string]func(store persistence.Store, nilHandler bool, opts ...any) (any, error){
	"WrapAPIGateway": func(store persistence.Store, nilHandler bool, opts ...any) (any, error) {
		h := restHandler
		if nilHandler {
			h = nil
		}
		return httpapi.WrapAPIGateway(h, store, as[idempotency.HandlerOption](opts)...)
	},
	"WrapAPIGatewayV2": func(store persistence.Store, nilHandler bool, opts ...any) (any, error) {
		h := v2Handler
		if nilHandler {
			h = nil
		}
		return httpapi.WrapAPIGatewayV2(h, store, as[idempotency.HandlerOption](opts)...)
	},
	"WrapFunctionURL": func(store persistence.Store, nilHandler bool, opts ...any) (any, error) {
		h := functionURLHandler
		if nilHandler {
			h = nil
		}
		return httpapi.WrapFunctionURL(h, store, as[idempotency.HandlerOption](opts)...)
	},
	"WrapALB": func(store persistence.Store, nilHandler bool, opts ...any) (any, error) {
		h := albHandler
		if nilHandler {
			h = nil
		}
		return httpapi.WrapALB(h, store, as[idempotency.HandlerOption](opts)...)
	},
}

func TestWrapRejectsBadOptions(t *testing.T) {
	cases := map[string]struct {
		opts []any
		want string
	}{
		"nil option":                 {[]any{nil}, "nil option"},
		"empty header":               {[]any{httpapi.WithHeader("")}, `httpapi.WithHeader(""): not a valid header name`},
		"header with space":          {[]any{httpapi.WithHeader("Idempotency Key")}, "not a valid header name"},
		"no methods":                 {[]any{httpapi.WithMethods()}, "httpapi.WithMethods: no methods"},
		"invalid method":             {[]any{httpapi.WithMethods("POST", "PO ST")}, `httpapi.WithMethods: "PO ST" is not a valid method`},
		"invalid fingerprint header": {[]any{httpapi.WithFingerprintHeaders("Content Type")}, "not a valid header name"},
		"authorization":              {[]any{httpapi.WithFingerprintHeaders("Content-Type", "authorization")}, "carries credentials"},
		"cookie":                     {[]any{httpapi.WithFingerprintHeaders("Cookie")}, "carries credentials"},
		"nil scope":                  {[]any{httpapi.WithScope(nil)}, "httpapi.WithScope: nil function"},
		"nil logger":                 {[]any{idempotency.WithLogger(nil)}, "idempotency.WithLogger: nil logger"},
		"Retry-After cap below 1s":   {[]any{httpapi.WithMaxRetryAfter(500 * time.Millisecond)}, "httpapi.WithMaxRetryAfter(500ms)"},
		"invalid core option":        {[]any{idempotency.WithExpiry(0)}, "WithExpiry"},
		"nil core option":            {[]any{nil}, "nil option"},
		"several":                    {[]any{httpapi.WithHeader(""), httpapi.WithMethods()}, "no methods"},
		"given twice":                {[]any{httpapi.WithHeader("X-Key"), httpapi.WithHeader("X-Other")}, "httpapi.WithHeader given twice"},
		"core option given twice":    {[]any{idempotency.WithExpiry(time.Hour), idempotency.WithExpiry(2 * time.Hour)}, "idempotency.WithExpiry given twice"},
	}
	for wrapName, wrap := range wrappers {
		for name, tc := range cases {
			t.Run(wrapName+"/"+name, func(t *testing.T) {
				h, err := wrap(memory.New(), false, tc.opts...)
				require.Error(t, err)
				assert.Nil(t, h)
				assert.True(t, strings.HasPrefix(err.Error(), "httpapi: "), err.Error())
				assert.Contains(t, err.Error(), tc.want)
			})
		}
		t.Run(wrapName+"/nil handler", func(t *testing.T) {
			_, err := wrap(memory.New(), true)
			assert.EqualError(t, err, "httpapi: "+wrapName+": nil handler")
		})
		t.Run(wrapName+"/nil store", func(t *testing.T) {
			_, err := wrap(nil, false)
			assert.EqualError(t, err, "httpapi: "+wrapName+": nil persistence.Store")
		})
	}
}

func TestMustWrapPanics(t *testing.T) {
	bad := httpapi.WithHeader("")
	assert.Panics(t, func() { idempotency.Must(httpapi.WrapAPIGateway(restHandler, memory.New(), bad)) })
	assert.Panics(t, func() { idempotency.Must(httpapi.WrapAPIGatewayV2(v2Handler, memory.New(), bad)) })
	assert.Panics(t, func() { idempotency.Must(httpapi.WrapFunctionURL(functionURLHandler, memory.New(), bad)) })
	assert.Panics(t, func() { idempotency.Must(httpapi.WrapALB(albHandler, memory.New(), bad)) })
	assert.NotNil(t, idempotency.Must(httpapi.WrapAPIGateway(restHandler, memory.New())))
	assert.NotNil(t, idempotency.Must(httpapi.WrapAPIGatewayV2(v2Handler, memory.New())))
	assert.NotNil(t, idempotency.Must(httpapi.WrapFunctionURL(functionURLHandler, memory.New())))
	assert.NotNil(t, idempotency.Must(httpapi.WrapALB(albHandler, memory.New())))
}

func TestDisabledOnlyCallsTheHandler(t *testing.T) {
	t.Setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
	for name, wrap := range wrappers {
		t.Run(name, func(t *testing.T) {
			h, err := wrap(memory.New(), false)
			require.NoError(t, err)
			assert.NotNil(t, h)

			_, err = wrap(memory.New(), false, httpapi.WithHeader(""))
			assert.Error(t, err, "options are checked even so")
		})
	}
}

func TestDefaultKeyPrefixIsTheHandlers(t *testing.T) {
	store := recordingStore()
	h := idempotency.Must(httpapi.WrapAPIGatewayV2(v2Handler, store))
	ev := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"idempotency-key": "k"}}
	ev.RequestContext.HTTP.Method = "POST"
	_, err := h(t.Context(), ev)
	require.NoError(t, err)
	require.Len(t, store.Updates(), 1)
	// The prefix is the one idempotency.Wrap gives the same function.
	wrapStore := recordingStore()
	_, err = idempotency.Must(idempotency.Wrap(v2Handler, wrapStore))(t.Context(), ev)
	require.NoError(t, err)
	prefix, _, _ := strings.Cut(store.Updates()[0].Key, "#")
	wrapPrefix, _, _ := strings.Cut(wrapStore.Updates()[0].Key, "#")
	assert.Equal(t, "httpapi_test.v2Handler", prefix)
	assert.Equal(t, wrapPrefix, prefix)

	store = recordingStore()
	h = idempotency.Must(httpapi.WrapAPIGatewayV2(v2Handler, store, idempotency.WithKeyPrefix("orders")))
	_, err = h(t.Context(), ev)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(store.Updates()[0].Key, "orders#"))
}
