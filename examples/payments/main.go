// Command payments is an AWS Lambda function behind an API Gateway HTTP
// API: POST /payments charges a customer once per Idempotency-Key. See
// README.md, and package payment for the handler.
//
// Configuration comes from the environment: IDEMPOTENCY_TABLE and
// PAYMENTS_TABLE name the DynamoDB tables, and the AWS SDK reads its own
// variables (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, credentials).
// Each ledger entry is staged, and commits with the completion of its
// payment's key in one transaction; PAYMENTS_TRANSACTIONS=0 writes it
// directly instead, for servers without TransactWriteItems (dynalite).
// PAYMENTS_STEPS=1 runs the charge, its ledger entry and the receipt
// email as steps, so that a retry resumes after the finished ones.
// PAYMENTS_DEMO_DELAY=1 enables the X-Demo-Delay request headers, for
// local demonstrations only.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/examples/internal/sdkconfig"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func main() {
	// Everything that can fail is checked at cold start, not on the first
	// request.
	handler, err := newHandler(context.Background())
	if err != nil {
		slog.Error("payments: cannot start", slog.Any("error", err))
		os.Exit(1)
	}
	lambda.Start(handler)
}

func newHandler(ctx context.Context) (httpapi.APIGatewayV2Handler, error) {
	idemTable, payTable := os.Getenv(payment.EnvIdempotencyTable), os.Getenv(payment.EnvPaymentsTable)
	if idemTable == "" || payTable == "" {
		return nil, fmt.Errorf("%s and %s must name the DynamoDB tables", payment.EnvIdempotencyTable, payment.EnvPaymentsTable)
	}
	// The configuration honours AWS_ENDPOINT_URL_DYNAMODB, so the same
	// binary runs against DynamoDB Local or dynalite, and suits many
	// concurrent invocations in one process (Lambda Managed Instances).
	cfg, err := sdkconfig.Load(ctx, sdkconfig.Concurrency())
	if err != nil {
		return nil, err
	}
	client := dynamodb.NewFromConfig(cfg)
	store, err := ddbstore.New(client, idemTable)
	if err != nil {
		return nil, err
	}
	transactions := os.Getenv(payment.EnvTransactions) != "0"
	return payment.New(payment.Config{
		// Completed records are kept in memory too: a retry that reaches
		// the same execution environment costs no request.
		Store:        memory.NewCache(store, 1024),
		Ledger:       &payment.DynamoDBLedger{Client: client, Table: payTable, Staged: transactions},
		Transactions: transactions,
		DemoDelay:    os.Getenv(payment.EnvDemoDelay) == "1",
		Steps:        os.Getenv(payment.EnvSteps) == "1",
	})
}
