package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/orders/order"
	"github.com/retrysafe/retrysafe/internal/dynalite"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func TestMain(m *testing.M) { dynalite.Main(m) }

const queueARN = "arn:aws:sqs:us-east-1:123456789012:OrdersQueue"

// env is a test's tables on the shared server.
type env struct {
	srv              *dynalite.Server
	ordersTable      string
	idempotencyTable string
}

func setup(t *testing.T) *env {
	t.Helper()
	srv := dynalite.Shared(t)
	return &env{
		srv: srv,
		ordersTable: srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
			return order.CreateOrdersTable(ctx, client, name)
		}),
		idempotencyTable: srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
			return dynamodb.CreateTable(ctx, client, name)
		}),
	}
}

// items returns the items of the orders table, and checks the key that
// every processing writes.
func (e *env) items(t *testing.T) []order.Processing {
	t.Helper()
	items, err := order.ScanOrders(t.Context(), e.srv.NewClient(), e.ordersTable)
	require.NoError(t, err)
	for _, p := range items {
		assert.Regexp(t, `^orders#[0-9a-f]{64}$`, p.IdempotencyKey)
	}
	return items
}

// TestHandlerFromEnv: main's configuration, from the environment variables
// of template.yaml and the SDK's own (AWS_ENDPOINT_URL_DYNAMODB).
func TestHandlerFromEnv(t *testing.T) {
	e := setup(t)
	t.Setenv(order.EnvOrdersTable, "")
	t.Setenv(order.EnvIdempotencyTable, "")
	_, err := handlerFromEnv(t.Context())
	require.ErrorContains(t, err, "ORDERS_TABLE and IDEMPOTENCY_TABLE must be set")

	t.Setenv(order.EnvOrdersTable, e.ordersTable)
	t.Setenv(order.EnvIdempotencyTable, e.idempotencyTable)
	for _, kv := range e.srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	handler, err := handlerFromEnv(t.Context())
	require.NoError(t, err)

	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", "sqs-event.json"))
	require.NoError(t, err)
	var event events.SQSEvent
	require.NoError(t, json.Unmarshal(b, &event))
	event.Records = event.Records[:1]
	m := &event.Records[0]
	m.MessageId, m.EventSourceARN = "m-1", queueARN
	m.Body = fmt.Sprintf(`{"order_id": %q, "customer": "c-1", "amount": 4200}`, "ord-1")

	resp, err := handler(t.Context(), event)
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	items := e.items(t)
	if assert.Len(t, items, 1) {
		assert.Equal(t, "ord-1", items[0].OrderID)
		assert.Equal(t, "m-1", items[0].MessageID)
	}
}
