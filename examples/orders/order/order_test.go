package order_test

// The handler against dynalite, a DynamoDB-compatible server: SQS batches
// delivered twice, overlapping batches delivered at once to two execution
// environments, and a failing downstream. The orders table shows every
// real processing as one item.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/orders/order"
	"github.com/retrysafe/retrysafe/examples/orders/order/ordertest"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func TestMain(m *testing.M) { dynalite.Main(m) }

// env is a test's tables, with the handlers of its execution environments.
type env struct{ *ordertest.Env }

func setup(t *testing.T) *env { return &env{ordertest.Setup(t)} }

// handler returns the handler of one execution environment: clients of its
// own, as a separate Lambda instance has.
func (e *env) handler(t *testing.T) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	t.Helper()
	return e.handlerWith(t, e.Srv.NewClient())
}

// handlerWith returns a handler that writes orders through orders.
func (e *env) handlerWith(t *testing.T, orders order.OrdersClient) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	t.Helper()
	store, err := dynamodb.New(e.Srv.NewClient(), e.IdempotencyTable)
	require.NoError(t, err)
	h, err := order.NewHandler(order.Deps{
		Orders:      orders,
		OrdersTable: e.OrdersTable,
		Store:       store,
		Logger:      slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	return h
}

// processed returns how many items the orders table holds per order ID.
func (e *env) processed(t *testing.T) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, p := range e.Items(t) {
		counts[p.OrderID]++
	}
	return counts
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// TestRedelivery: the same batch delivered twice writes each order once;
// the bad message fails both times and writes nothing.
func TestRedelivery(t *testing.T) {
	e := setup(t)
	handler := e.handler(t)
	var event events.SQSEvent
	for i := range 6 {
		event.Records = append(event.Records, ordertest.Message(t, fmt.Sprintf("m-%d", i), fmt.Sprintf("ord-%d", i)))
	}
	bad := ordertest.Message(t, "m-bad", "")
	bad.Body = `{"customer": "c-1"}`
	event.Records = append(event.Records, bad)

	for range 2 {
		resp, err := handler(t.Context(), event)
		require.NoError(t, err)
		assert.Equal(t, []string{"m-bad"}, failedIDs(resp))
	}
	counts := e.processed(t)
	assert.Len(t, counts, 6)
	for id, n := range counts {
		assert.Equal(t, 1, n, "order %s processed %d times", id, n)
	}
}

// TestOverlappingBatches: two execution environments receive overlapping
// batches at once (orders 0-5 and 3-9, the overlap re-sent by the
// producer as new messages), and both batches are delivered again; then
// failed messages (in progress in the other environment) come back until
// none fail. Each order is written once.
func TestOverlappingBatches(t *testing.T) {
	e := setup(t)
	var a, b events.SQSEvent
	for i := 0; i <= 5; i++ {
		a.Records = append(a.Records, ordertest.Message(t, fmt.Sprintf("a-%d", i), fmt.Sprintf("ord-%d", i)))
	}
	for i := 3; i <= 9; i++ {
		b.Records = append(b.Records, ordertest.Message(t, fmt.Sprintf("b-%d", i), fmt.Sprintf("ord-%d", i)))
	}
	envs := []func(context.Context, events.SQSEvent) (events.SQSEventResponse, error){e.handler(t), e.handler(t)}

	// Each environment gets both batches, in opposite orders, at once.
	pending := make([][]events.SQSMessage, 2)
	var wg sync.WaitGroup
	for i, batches := range [][]events.SQSEvent{{a, b}, {b, a}} {
		wg.Go(func() {
			for _, event := range batches {
				resp, err := envs[i](t.Context(), event)
				assert.NoError(t, err)
				pending[i] = append(pending[i], failedOf(event, resp)...)
			}
		})
	}
	wg.Wait()
	for round := 0; len(pending[0])+len(pending[1]) > 0; round++ {
		require.Less(t, round, 5, "messages keep failing: %v", pending)
		for i := range envs {
			if len(pending[i]) == 0 {
				continue
			}
			event := events.SQSEvent{Records: pending[i]}
			resp, err := envs[i](t.Context(), event)
			require.NoError(t, err)
			pending[i] = failedOf(event, resp)
		}
	}

	counts := e.processed(t)
	assert.Len(t, counts, 10)
	for id, n := range counts {
		assert.Equal(t, 1, n, "order %s processed %d times", id, n)
	}
}

// failedOf returns the messages of event that resp reports as failed.
func failedOf(event events.SQSEvent, resp events.SQSEventResponse) []events.SQSMessage {
	ids := failedIDs(resp)
	var out []events.SQSMessage
	for _, m := range event.Records {
		if slices.Contains(ids, m.MessageId) {
			out = append(out, m)
		}
	}
	return out
}

// TestDownstreamFailure: when writing an order fails, only its message is
// reported, its key is released, and the redelivered message writes it. A
// write whose reply was lost and that the SDK sent again writes one item.
func TestDownstreamFailure(t *testing.T) {
	e := setup(t)
	event := events.SQSEvent{Records: []events.SQSMessage{ordertest.Message(t, "m-1", "ord-1"), ordertest.Message(t, "m-2", "ord-2")}}

	down := &failingOrders{OrdersClient: e.Srv.NewClient(), order: "ord-1"}
	resp, err := e.handlerWith(t, down)(t.Context(), event)
	require.NoError(t, err)
	assert.Equal(t, []string{"m-1"}, failedIDs(resp))
	assert.Equal(t, map[string]int{"ord-2": 1}, e.processed(t))

	// Delivered again, only ord-1 is written; its first reply is lost and
	// the SDK sends the same item again.
	faults := &dynalite.Faults{}
	faults.LoseReply("PutItem", 1)
	resp, err = e.handlerWith(t, e.Srv.NewClient(faults.Register))(t.Context(), event)
	require.NoError(t, err)
	assert.Empty(t, failedIDs(resp))
	assert.Equal(t, 1, faults.Fired(dynalite.LostReply))
	assert.Equal(t, map[string]int{"ord-1": 1, "ord-2": 1}, e.processed(t))
}

// failingOrders fails the writes of one order, as an unavailable
// downstream would.
type failingOrders struct {
	order.OrdersClient
	order string
}

func (f *failingOrders) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	if id, _ := in.Item["order_id"].(*types.AttributeValueMemberS); id != nil && id.Value == f.order {
		return nil, errors.New("orders table unavailable")
	}
	return f.OrdersClient.PutItem(ctx, in, optFns...)
}

// TestNewHandlerChecksDeps: missing dependencies fail at cold start.
func TestNewHandlerChecksDeps(t *testing.T) {
	_, err := order.NewHandler(order.Deps{})
	require.Error(t, err)
}

// TestScanOrdersRejectsForeignItems: an item that processing did not
// write is reported, not read as an order.
func TestScanOrdersRejectsForeignItems(t *testing.T) {
	e := setup(t)
	client := e.Srv.NewClient()
	_, err := client.PutItem(t.Context(), &awsdynamodb.PutItemInput{
		TableName: aws.String(e.OrdersTable),
		Item: map[string]types.AttributeValue{
			order.OrdersKeyAttr: &types.AttributeValueMemberS{Value: "p-1"},
			"order_id":          &types.AttributeValueMemberS{Value: "ord-1"},
		},
	})
	require.NoError(t, err)
	_, err = order.ScanOrders(t.Context(), client, e.OrdersTable)
	require.ErrorContains(t, err, `item "p-1" without string message_id, idempotency_key, body, processed_at`)
}
