package main_test

// An end-to-end test of the function example: its bootstrap binary under
// the Lambda Runtime Interface Emulator, against dynalite. It skips
// without Node.js, dynalite or the emulator, unless
// IDEMPOTENCY_REQUIRE_INTEGRATION=1.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/function/confirmation"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/rie"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// Two deliveries of an order send one email, logged once, and return the
// same confirmation; the order ID reused for another recipient fails with
// the library's error type, as Lambda reports it.
func TestEndToEnd(t *testing.T) {
	srv := dynalite.Start(t)
	table := dynalite.TableName(t)
	require.NoError(t, ddbstore.CreateTable(t.Context(), srv.NewClient(), table))
	bootstrap, err := rie.BuildFunction(t.Context(), "./function", t.TempDir())
	require.NoError(t, err)
	in := rie.Start(t, rie.Config{
		Bootstrap: bootstrap,
		Env:       append(srv.Env(), confirmation.EnvIdempotencyTable+"="+table),
	})

	invoke := func(o confirmation.Order) *rie.Response {
		t.Helper()
		payload, err := json.Marshal(o)
		require.NoError(t, err)
		resp, err := in.Invoke(t.Context(), payload)
		require.NoError(t, err)
		return resp
	}
	order := confirmation.Order{OrderID: "ord_1", CustomerEmail: "ada@example.com", Total: 4200, Currency: "EUR"}
	var first, second confirmation.Confirmation
	resp := invoke(order)
	require.NoError(t, resp.Err())
	require.NoError(t, json.Unmarshal(resp.Payload, &first))
	resp = invoke(order)
	require.NoError(t, resp.Err())
	require.NoError(t, json.Unmarshal(resp.Payload, &second))
	assert.Equal(t, first, second)
	assert.Regexp(t, `^msg_`, first.MessageID)

	order.CustomerEmail = "eve@example.com"
	var fe *rie.FunctionError
	require.ErrorAs(t, invoke(order).Err(), &fe)
	assert.Equal(t, "PayloadMismatchError", fe.Type)

	require.NoError(t, in.Stop()) // then every line is read
	sent := 0
	for _, line := range in.Logs() {
		if strings.Contains(line, `"msg":"confirmation: email sent"`) {
			sent++
			assert.Contains(t, line, first.MessageID)
		}
	}
	assert.Equal(t, 1, sent, "one email")
}
