// Command orders is an SQS consumer on AWS Lambda that processes each order
// once, however often SQS delivers it, and reports only the failed messages
// of a batch so that only they are retried (ReportBatchItemFailures). See
// README.md, and package order for the handler.
//
// Messages carry a JSON body {"order_id": "...", ...}. Processing an order
// writes one item, with a fresh processing_id, to the table named by
// ORDERS_TABLE; the idempotency records live in the table named by
// IDEMPOTENCY_TABLE. The AWS SDK reads the rest of its configuration from
// the standard environment variables (AWS_REGION, credentials, and
// AWS_ENDPOINT_URL_DYNAMODB for a local DynamoDB-compatible server).
//
// template.yaml at the repository root deploys it as OrdersFunction, with
// its queue, dead-letter queue and tables; see README.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/examples/internal/sdkconfig"
	"github.com/retrysafe/retrysafe/examples/orders/order"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func main() {
	handler, err := handlerFromEnv(context.Background())
	if err != nil {
		slog.Error("orders: cannot start", "error", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}

// handlerFromEnv builds the handler from the environment, at cold start.
func handlerFromEnv(ctx context.Context) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	ordersTable, idempotencyTable := os.Getenv(order.EnvOrdersTable), os.Getenv(order.EnvIdempotencyTable)
	if ordersTable == "" || idempotencyTable == "" {
		return nil, fmt.Errorf("orders: %s and %s must be set", order.EnvOrdersTable, order.EnvIdempotencyTable)
	}
	// The batch runs records in parallel over one client.
	cfg, err := sdkconfig.Load(ctx, order.Parallelism*sdkconfig.Concurrency())
	if err != nil {
		return nil, fmt.Errorf("orders: loading the AWS configuration: %w", err)
	}
	client := awsdynamodb.NewFromConfig(cfg)
	store, err := dynamodb.New(client, idempotencyTable)
	if err != nil {
		return nil, err
	}
	return order.NewHandler(order.Deps{Orders: client, OrdersTable: ordersTable, Store: store})
}
