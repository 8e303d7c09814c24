package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/core"
)

// charge is the handler of the tests' plain events.
type charge struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
}

type receipt struct {
	Receipt string `json:"receipt"`
}

func chargeCard(ctx context.Context, c charge) (receipt, error) {
	return receipt{Receipt: "rcpt_" + c.OrderID}, nil
}

// keyJSON is the output of key -o json.
type keyJSON struct {
	Key         string `json:"key"`
	Tenant      string `json:"tenant"`
	PayloadHash string `json:"payload_hash"`
}

func keyOf(t *testing.T, args ...string) keyJSON {
	t.Helper()
	r := runCmd(t, append([]string{"key", "-o", "json"}, args...)...)
	requireOK(t, r)
	var k keyJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &k), r.stdout)
	return k
}

// getJSON is the output of get -o json, as far as the tests read it.
type getJSON struct {
	Key          string          `json:"key"`
	Tenant       string          `json:"tenant"`
	Status       string          `json:"status"`
	State        string          `json:"state"`
	OwnerToken   string          `json:"owner_token"`
	PayloadHash  string          `json:"payload_hash"`
	ResponseSize int             `json:"response_size"`
	Response     json.RawMessage `json:"response"`
}

func getRecord(t *testing.T, f *fixture, key string) getJSON {
	t.Helper()
	r := runCmd(t, f.with("get", key, "-o", "json")...)
	requireOK(t, r)
	var g getJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &g), r.stdout)
	return g
}

func TestKeyAndGetFindWrapsRecord(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		t.Setenv(core.EnvFunctionName, "payments")
		// The default prefix: <function>.<Go name of chargeCard>.
		h := idempotency.Must(idempotency.Wrap(chargeCard, f.store, idempotency.WithKey("order_id"), idempotency.WithPayloadValidation("amount")))
		event := filepath.Join("testdata", "events", "charge.json")
		data, err := os.ReadFile(event)
		require.NoError(t, err)
		var in charge
		require.NoError(t, json.Unmarshal(data, &in))
		_, err = h(t.Context(), in)
		require.NoError(t, err)

		// AWS_LAMBDA_FUNCTION_NAME is the default of --function.
		k := keyOf(t, "--handler", core.FuncName(chargeCard), "--key", "order_id", "--validation", "amount", event)
		require.True(t, strings.HasPrefix(k.Key, "payments."+core.FuncName(chargeCard)+"#"), k.Key)
		rec, err := f.store.Get(t.Context(), k.Key)
		require.NoError(t, err, "the library's record is under the key")
		require.Equal(t, rec.PayloadHash, k.PayloadHash)

		// The same key from stdin, with the prefix given.
		r := runAt(t, time.Now(), string(data), "key", "-q", "--prefix", "payments."+core.FuncName(chargeCard), "--key", "order_id", "--validation", "amount")
		requireOK(t, r)
		require.Equal(t, k.Key+"\n", r.stdout)

		g := getRecord(t, f, k.Key)
		require.Equal(t, k.Key, g.Key)
		require.Equal(t, "COMPLETED", g.Status)
		require.Equal(t, "completed", g.State)
		require.Equal(t, rec.Token, g.OwnerToken)
		require.Equal(t, k.PayloadHash, g.PayloadHash)
		require.JSONEq(t, `{"receipt":"rcpt_ord_1001"}`, string(g.Response))
		require.Equal(t, len(`{"receipt":"rcpt_ord_1001"}`), g.ResponseSize)
	})
}

func TestKeyAndGetFindTheHTTPAdaptersRecord(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		var seen string
		h := idempotency.Must(httpapi.WrapAPIGatewayV2(func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			seen, _ = idempotency.KeyFromContext(ctx)
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"payment_id":"pay_1"}`}, nil
		}, f.store, idempotency.WithKeyPrefix("payments.main.createPayment"),
			httpapi.WithScope(httpapi.ScopeHeader("X-Tenant")), httpapi.WithFingerprintHeaders("Content-Type")))
		event := filepath.Join("testdata", "events", "post-payment.json")
		data, err := os.ReadFile(event)
		require.NoError(t, err)
		var req events.APIGatewayV2HTTPRequest
		require.NoError(t, json.Unmarshal(data, &req))
		resp, err := h(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, 201, resp.StatusCode)

		for _, kind := range []string{"auto", "apigatewayv2"} {
			k := keyOf(t, "--http", kind, "--function", "payments", "--handler", "main.createPayment",
				"--scope", "header:X-Tenant", "--fingerprint-header", "Content-Type", event)
			require.Equal(t, seen, k.Key, "--http %s", kind)
			g := getRecord(t, f, k.Key)
			require.Equal(t, k.PayloadHash, g.PayloadHash)
			require.Equal(t, "completed", g.State)
			var stored struct {
				StatusCode int    `json:"statusCode"`
				Body       string `json:"body"`
			}
			require.NoError(t, json.Unmarshal(g.Response, &stored))
			require.Equal(t, 201, stored.StatusCode)
		}

		// Without the scope, another key: no record.
		k := keyOf(t, "--http", "auto", "--prefix", "payments.main.createPayment", event)
		require.NotEqual(t, seen, k.Key)
		r := runCmd(t, f.with("get", k.Key)...)
		require.Equal(t, exitNotFound, r.code, r.stderr)
		require.Contains(t, r.stderr, "holds no record for")
	})
}

// A function in Lambda's tenant isolation mode keeps a record per tenant:
// key --tenant finds it, for Wrap and the HTTP adapters, and get shows
// the tenant that scopes it.
func TestKeyAndGetOfATenant(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{TenantID: "blue team"})
		h := idempotency.Must(idempotency.Wrap(chargeCard, f.store, idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("payments.main.chargeCard")))
		event := filepath.Join("testdata", "events", "charge.json")
		data, err := os.ReadFile(event)
		require.NoError(t, err)
		var in charge
		require.NoError(t, json.Unmarshal(data, &in))
		_, err = h(ctx, in)
		require.NoError(t, err)

		k := keyOf(t, "--prefix", "payments.main.chargeCard", "--key", "order_id", "--tenant", "blue team", event)
		require.Equal(t, "blue team", k.Tenant)
		require.Contains(t, k.Key, "#tenant=blue%20team#")
		g := getRecord(t, f, k.Key)
		require.Equal(t, "completed", g.State)
		require.Equal(t, "blue team", g.Tenant)
		r := runCmd(t, f.with("get", k.Key)...)
		requireOK(t, r)
		require.Contains(t, r.stdout, "blue team (the key's tenant scope")

		// Another tenant's key, and the key without a tenant: no record.
		for _, args := range [][]string{{"--tenant", "green"}, nil} {
			other := keyOf(t, append([]string{"--prefix", "payments.main.chargeCard", "--key", "order_id", event}, args...)...)
			require.NotEqual(t, k.Key, other.Key)
			r := runCmd(t, f.with("get", other.Key)...)
			require.Equal(t, exitNotFound, r.code, r.stderr)
		}

		// The HTTP adapters' key of a tenant.
		var seen string
		api := idempotency.Must(httpapi.WrapAPIGatewayV2(func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			seen, _ = idempotency.KeyFromContext(ctx)
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		}, f.store, idempotency.WithKeyPrefix("payments.main.createPayment")))
		post := filepath.Join("testdata", "events", "post-payment.json")
		data, err = os.ReadFile(post)
		require.NoError(t, err)
		var req events.APIGatewayV2HTTPRequest
		require.NoError(t, json.Unmarshal(data, &req))
		_, err = api(ctx, req)
		require.NoError(t, err)
		hk := keyOf(t, "--http", "auto", "--prefix", "payments.main.createPayment", "--tenant", "blue team", post)
		require.Equal(t, seen, hk.Key)
	})
}
