package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/orders/order"
	"github.com/retrysafe/retrysafe/examples/orders/order/ordertest"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
)

func TestMain(m *testing.M) { dynalite.Main(m) }

// TestHandlerFromEnv: main's configuration, from the environment variables
// of template.yaml and the SDK's own (AWS_ENDPOINT_URL_DYNAMODB).
func TestHandlerFromEnv(t *testing.T) {
	e := ordertest.Setup(t)
	t.Setenv(order.EnvOrdersTable, "")
	t.Setenv(order.EnvIdempotencyTable, "")
	_, err := handlerFromEnv(t.Context())
	require.ErrorContains(t, err, "ORDERS_TABLE and IDEMPOTENCY_TABLE must be set")

	t.Setenv(order.EnvOrdersTable, e.OrdersTable)
	t.Setenv(order.EnvIdempotencyTable, e.IdempotencyTable)
	for _, kv := range e.Srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	handler, err := handlerFromEnv(t.Context())
	require.NoError(t, err)

	resp, err := handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{ordertest.Message(t, "m-1", "ord-1")}})
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	items := e.Items(t)
	if assert.Len(t, items, 1) {
		assert.Equal(t, "ord-1", items[0].OrderID)
		assert.Equal(t, "m-1", items[0].MessageID)
	}
}
