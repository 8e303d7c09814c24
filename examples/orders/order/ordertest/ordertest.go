// Package ordertest is what the tests of the orders example share: a
// test's tables on the shared dynalite server, the messages of the queue,
// and the items that processing writes.
package ordertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/examples/orders/order"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// QueueARN is the orders queue, as the messages of Message name it.
const QueueARN = "arn:aws:sqs:us-east-1:123456789012:OrdersQueue"

// Env is a test's tables on the shared server.
type Env struct {
	Srv              *dynalite.Server
	OrdersTable      string
	IdempotencyTable string
}

// Setup creates a test's tables on the server of dynalite.Shared (the
// test package's TestMain calls dynalite.Main).
func Setup(t testing.TB) *Env {
	t.Helper()
	srv := dynalite.Shared(t)
	return &Env{
		Srv: srv,
		OrdersTable: srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
			return order.CreateOrdersTable(ctx, client, name)
		}),
		IdempotencyTable: srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
			return dynamodb.CreateTable(ctx, client, name)
		}),
	}
}

// keyPattern is the idempotency key of an order: the example's key prefix
// and a SHA-256 in hex.
var keyPattern = regexp.MustCompile(`^orders#[0-9a-f]{64}$`)

// Items returns the items of the orders table, and checks the key that
// every processing writes.
func (e *Env) Items(t testing.TB) []order.Processing {
	t.Helper()
	items, err := order.ScanOrders(t.Context(), e.Srv.NewClient(), e.OrdersTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range items {
		if !keyPattern.MatchString(p.IdempotencyKey) {
			t.Errorf("item %s: idempotency key %q does not match %s", p.ProcessingID, p.IdempotencyKey, keyPattern)
		}
	}
	return items
}

// Message returns an SQS message of the queue, shaped as the sample event
// of aws-lambda-go (testdata/events at the module root), with a JSON order
// body.
func Message(t testing.TB, id, orderID string) events.SQSMessage {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "events", "sqs-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sample events.SQSEvent
	if err := json.Unmarshal(b, &sample); err != nil {
		t.Fatal(err)
	}
	m := sample.Records[0]
	m.MessageId, m.EventSourceARN = id, QueueARN
	m.Body = fmt.Sprintf(`{"order_id": %q, "customer": "c-1", "amount": 4200}`, orderID)
	return m
}
