package idempotency_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// invocation returns the context of a Lambda invocation of tenant ("" for
// an invocation without one).
func invocation(ctx context.Context, tenant string) context.Context {
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-" + tenant, TenantID: tenant})
}

// tenantCharges is a handler that answers with the tenant it ran for, and
// counts its runs per tenant.
type tenantCharges struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *tenantCharges) handle(ctx context.Context, o order) (string, error) {
	lc, _ := lambdacontext.FromContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[lc.TenantID]++
	return "charged " + o.OrderID + " for " + lc.TenantID, nil
}

// Two tenants whose requests select the same key get a record each: each
// tenant's side effect runs, each gets its own answer, and each retry
// replays its own tenant's. An invocation without a tenant gets none of
// theirs.
func TestTenantsKeepRecordsApart(t *testing.T) {
	c := &tenantCharges{}
	charge := mustWrap(t, c.handle, memory.New(), idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"))
	o := order{OrderID: "1001", Amount: 42}
	for range 2 {
		for _, tenant := range []string{"blue", "green", ""} {
			got, err := charge(invocation(t.Context(), tenant), o)
			require.NoError(t, err)
			assert.Equal(t, "charged 1001 for "+tenant, got)
		}
	}
	assert.Equal(t, map[string]int{"blue": 1, "green": 1, "": 1}, c.runs, "one run per tenant, retries replayed")
}

// The tenant enters the key between the prefix and the hash; a key
// without a tenant is what it was before tenants.
func TestTenantKeys(t *testing.T) {
	keys := map[string]string{}
	h := func(ctx context.Context, o order) (string, error) {
		k, _ := idempotency.KeyFromContext(ctx)
		lc, _ := lambdacontext.FromContext(ctx)
		keys[lc.TenantID] = k
		return k, nil
	}
	charge := mustWrap(t, h, memory.New(), idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"))
	for _, tenant := range []string{"blue", "tenant 42/eu#1", ""} {
		_, err := charge(invocation(t.Context(), tenant), order{OrderID: "1001"})
		require.NoError(t, err)
	}
	const hash = "a0064c86a582fa64f14c66f6b43708d60e1bdb791ac2acfa332d059895c265f9" // of "1001"
	assert.Equal(t, core.Key("orders", "", []byte(`"1001"`)), keys[""])
	assert.Equal(t, "orders#"+hash, keys[""], "no tenant: the key of before")
	assert.Equal(t, "orders#tenant=blue#"+hash, keys["blue"])
	assert.Equal(t, "orders#tenant=tenant%2042%2Feu%231#"+hash, keys["tenant 42/eu#1"])
}

// Guard.Do scopes its keys by tenant too, and so everything built on it:
// the HTTP adapters, the batch handlers.
func TestGuardKeepsTenantsApart(t *testing.T) {
	g, err := idempotency.NewGuard(memory.New(), idempotency.WithKeyPrefix("p"))
	require.NoError(t, err)
	runs := 0
	do := func(tenant string) idempotency.Result {
		res, err := g.Do(invocation(t.Context(), tenant), "k", "", func(ctx context.Context) ([]byte, error) {
			runs++
			return json.Marshal(tenant)
		})
		require.NoError(t, err)
		return res
	}
	assert.Equal(t, `"blue"`, string(do("blue").Response))
	res := do("green")
	assert.Equal(t, idempotency.OutcomeNew, res.Outcome)
	assert.Equal(t, `"green"`, string(res.Response))
	res = do("blue")
	assert.Equal(t, idempotency.OutcomeReplay, res.Outcome)
	assert.Equal(t, `"blue"`, string(res.Response))
	assert.Equal(t, 2, runs)
}

// WithoutTenantIsolation gives up the tenant scope: every tenant shares
// the record of a key, and the first tenant's answer is everyone's.
func TestWithoutTenantIsolationSharesRecords(t *testing.T) {
	c := &tenantCharges{}
	charge := mustWrap(t, c.handle, memory.New(), idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"),
		idempotency.WithoutTenantIsolation())
	for _, tenant := range []string{"blue", "green", ""} {
		got, err := charge(invocation(t.Context(), tenant), order{OrderID: "1001"})
		require.NoError(t, err)
		assert.Equal(t, "charged 1001 for blue", got)
	}
	assert.Equal(t, map[string]int{"blue": 1}, c.runs)
}

// A prefix that contains the tenant's mark could be read as a tenant's key:
// wrapping refuses it.
func TestPrefixWithTheTenantMarkIsRefused(t *testing.T) {
	_, err := idempotency.Wrap((&tenantCharges{}).handle, memory.New(), idempotency.WithKeyPrefix("orders#tenant=blue"))
	require.ErrorContains(t, err, `"#tenant="`)
}
