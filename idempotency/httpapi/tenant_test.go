package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// tenantInvocation returns the context of a Lambda invocation of tenant.
func tenantInvocation(ctx context.Context, tenant string) context.Context {
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{TenantID: tenant})
}

// Under Lambda's tenant isolation mode, two tenants that send the same
// Idempotency-Key get a record each, with every adapter: each tenant's
// handler runs, and each retry replays its own tenant's response. The
// tenant combines with the scope.
func TestLambdaAdaptersKeepTenantsApart(t *testing.T) {
	forEachEventType(t, func(t *testing.T, et eventType) {
		if et.handler {
			t.Skip("Middleware serves HTTP, outside a Lambda invocation")
		}
		a := app{respond: func(run int, req httpReq) (httpResp, error) {
			resp := created(run)
			resp.body = fmt.Sprintf(`{"run":%d}`, run)
			return resp, nil
		}}
		send := et.wrap(t, a.handle, memory.New(), httpapi.WithScope(httpapi.ScopeHeader("X-Caller")), idempotency.WithLogger(discard()))
		req := post("shared-key", orderA, header{"X-Caller", "c-1"})
		first := map[string]httpResp{}
		for _, tenant := range []string{"blue", "green"} {
			resp, err := send(tenantInvocation(t.Context(), tenant), req)
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.status, tenant)
			first[tenant] = resp
		}
		assert.NotEqual(t, first["blue"].body, first["green"].body)
		for _, tenant := range []string{"blue", "green"} {
			replay, err := send(tenantInvocation(t.Context(), tenant), req)
			require.NoError(t, err)
			assert.Equal(t, "true", replay.headers.Get(httpapi.HeaderReplayed), tenant)
			assert.Equal(t, first[tenant], withoutReplayHeader(replay), "%s replays its own response", tenant)
		}
		assert.Equal(t, 2, a.count())
	})
}

// RecordKey gives the key of the record of a tenant's request.
func TestRecordKeyOfATenant(t *testing.T) {
	ev := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-no-authorizer.json")
	ev.RequestContext.HTTP.Method = "POST"
	ev.Headers = map[string]string{"idempotency-key": "k-1"}
	opts := []idempotency.HandlerOption{idempotency.WithKeyPrefix("orders")}
	plain, _, err := httpapi.RecordKey(t.Context(), &ev, opts...)
	require.NoError(t, err)
	blue, _, err := httpapi.RecordKey(tenantInvocation(t.Context(), "blue"), &ev, opts...)
	require.NoError(t, err)
	assert.Equal(t, "orders#tenant=blue#"+plain[len("orders#"):], blue)
	shared, _, err := httpapi.RecordKey(tenantInvocation(t.Context(), "blue"), &ev, append(opts, idempotency.WithoutTenantIsolation())...)
	require.NoError(t, err)
	assert.Equal(t, plain, shared)
}
