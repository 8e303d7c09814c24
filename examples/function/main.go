// Command function is an AWS Lambda function that confirms placed orders,
// sending each customer one confirmation email per order however often
// the order event is delivered. It shows an idempotent function inside a
// handler; see README.md, and package confirmation for the handler.
//
// Configuration comes from the environment: IDEMPOTENCY_TABLE names the
// DynamoDB table, and the AWS SDK reads its own variables (AWS_REGION,
// AWS_ENDPOINT_URL_DYNAMODB, credentials).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/examples/function/confirmation"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func main() {
	h, err := newHandler(context.Background())
	if err != nil {
		slog.Error("confirmation: cannot start", slog.Any("error", err))
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

func newHandler(ctx context.Context) (*confirmation.Handler, error) {
	table := os.Getenv(confirmation.EnvIdempotencyTable)
	if table == "" {
		return nil, fmt.Errorf("%s must name the DynamoDB table", confirmation.EnvIdempotencyTable)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	store, err := ddbstore.New(dynamodb.NewFromConfig(cfg), table)
	if err != nil {
		return nil, err
	}
	// Lambda sends what the function writes to CloudWatch Logs: JSON
	// lines are searchable there.
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	return confirmation.New(confirmation.Config{
		Store:  store,
		Mailer: confirmation.LogMailer{Logger: logger},
		Logger: logger,
	})
}
