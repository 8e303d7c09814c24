// Package coldstart holds two Lambda functions that measure what the
// library adds to a function's init (its INIT REPORT), next to each other:
// sdk, a handler with the DynamoDB client a function builds at init
// anyway, and wrapped, the same handler made idempotent: the store built
// over that client and the handler wrapped with a JMESPath key. Both are
// built and run by `make demo` and by BenchmarkColdStart in
// examples/payments; neither sends a request at init.
package coldstart

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/examples/internal/sdkconfig"
)

// Handler is the function both bootstraps run: it answers every API
// Gateway request with 201.
func Handler(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return events.APIGatewayProxyResponse{StatusCode: 201, Body: `{"status":"created"}`}, nil
}

// Key selects the idempotency key of the wrapped function.
const Key = "powertools_json(body).order_id"

// Client returns the DynamoDB client of the function, built at init as
// the examples build it (it honours AWS_ENDPOINT_URL_DYNAMODB), or exits.
func Client() *dynamodb.Client {
	cfg, err := sdkconfig.Load(context.Background(), sdkconfig.Concurrency())
	if err != nil {
		Exit(err)
	}
	return dynamodb.NewFromConfig(cfg)
}

// Exit logs err and exits: a function that cannot start.
func Exit(err error) {
	slog.Error("coldstart: cannot start", slog.Any("error", err))
	os.Exit(1)
}

// Table is the idempotency table of the wrapped function.
func Table() string {
	if t := os.Getenv("IDEMPOTENCY_TABLE"); t != "" {
		return t
	}
	return "idempotency"
}
