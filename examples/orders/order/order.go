// Package order is the core of the orders example: an SQS consumer on AWS
// Lambda that processes each order once, however often SQS delivers it,
// and reports only the failed messages of a batch so that only they are
// retried (ReportBatchItemFailures).
//
// Processing an order writes one item, with a fresh processing ID, to the
// orders table (see CreateOrdersTable), so a second processing would show
// as a second item. The handler is built by NewHandler from its
// dependencies (the orders table's client and the idempotency store); the
// example's main package builds them from the environment
// (EnvOrdersTable, EnvIdempotencyTable) for Lambda.
package order

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/persistence"
)

// Environment variables that the example's main package reads. The AWS SDK
// reads its own (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, credentials).
const (
	// EnvOrdersTable names the DynamoDB table of processed orders.
	EnvOrdersTable = "ORDERS_TABLE"
	// EnvIdempotencyTable names the DynamoDB table of idempotency records.
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"
)

// EnvVars lists the variables the example's main package reads.
var EnvVars = []string{EnvOrdersTable, EnvIdempotencyTable}

// KeyExpression selects an order's idempotency key from an SQS message: the
// order ID in its JSON body. Unlike the message ID, it also recognises an
// order that a producer sent twice, as two messages.
const KeyExpression = "powertools_json(body).order_id"

// KeyPrefix starts the idempotency keys of this function. It is fixed, so
// that keys survive renames of the Go code.
const KeyPrefix = "orders"

// Expiry is how long a processed order is remembered. Redeliveries of a
// failed batch end within minutes (the queue's visibility timeout times its
// maxReceiveCount); a day also covers producers that send an order again
// later.
const Expiry = 24 * time.Hour

// Parallelism is how many records of a batch are processed at a time.
const Parallelism = 4

// Order is the JSON body of an order message. Fields other than order_id
// are kept with the processed order, as the body.
type Order struct {
	OrderID string `json:"order_id"`
}

// OrdersClient is the part of the DynamoDB API that processing uses;
// *dynamodb.Client satisfies it. Its methods are the IAM actions the
// function needs on the orders table.
type OrdersClient interface {
	PutItem(ctx context.Context, params *awsdynamodb.PutItemInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error)
}

var _ OrdersClient = (*awsdynamodb.Client)(nil)

// Deps are what the handler needs.
type Deps struct {
	// Orders receives the processed orders, in OrdersTable.
	Orders      OrdersClient
	OrdersTable string
	// Store keeps the idempotency records.
	Store persistence.Store
	// Logger logs failed records. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of processed_at. Default time.Now.
	Now func() time.Time
}

// NewHandler returns the Lambda handler: it processes each order of an SQS
// batch once and reports the messages that failed, so that only they are
// retried.
func NewHandler(deps Deps) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	if deps.Orders == nil || deps.OrdersTable == "" || deps.Store == nil {
		return nil, errors.New("orders: Orders, OrdersTable and Store are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	p := &processor{deps: deps}
	return batch.SQS(p.process, deps.Store,
		idempotency.WithKey(KeyExpression),
		batch.WithParallelism(Parallelism),
		idempotency.WithLogger(deps.Logger),
		idempotency.WithKeyPrefix(KeyPrefix),
		idempotency.WithExpiry(Expiry))
}

type processor struct{ deps Deps }

// process processes one order: it writes one new item, with a fresh
// processing_id, to the orders table. That write is the side effect that
// must happen once per order: a second processing would show as a second
// item.
func (p *processor) process(ctx context.Context, msg events.SQSMessage) error {
	var order Order
	if err := json.Unmarshal([]byte(msg.Body), &order); err != nil {
		return fmt.Errorf("orders: decoding message %s: %w", msg.MessageId, err)
	}
	key, _ := idempotency.KeyFromContext(ctx)
	// The SDK may send the request again after a lost reply: it carries the
	// same processing_id, so the order is still written once.
	_, err := p.deps.Orders.PutItem(ctx, &awsdynamodb.PutItemInput{
		TableName: aws.String(p.deps.OrdersTable),
		Item: map[string]types.AttributeValue{
			OrdersKeyAttr:      &types.AttributeValueMemberS{Value: rand.Text()},
			attrOrderID:        &types.AttributeValueMemberS{Value: order.OrderID},
			attrMessageID:      &types.AttributeValueMemberS{Value: msg.MessageId},
			attrIdempotencyKey: &types.AttributeValueMemberS{Value: key},
			attrProcessedAt:    &types.AttributeValueMemberS{Value: p.deps.Now().UTC().Format(time.RFC3339Nano)},
			attrBody:           &types.AttributeValueMemberS{Value: msg.Body},
		},
	})
	if err != nil {
		return fmt.Errorf("orders: recording order %s: %w", order.OrderID, err)
	}
	return nil
}
