// Command wrapped is the function of command sdk made idempotent: at init
// it builds the DynamoDB store over the client and wraps the handler with
// a JMESPath key. Its init next to sdk's is what the library adds.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retrysafe/retrysafe/examples/payments/coldstart"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func main() {
	store, err := dynamodb.New(coldstart.Client(), coldstart.Table())
	if err != nil {
		coldstart.Exit(err)
	}
	handler, err := idempotency.Wrap(coldstart.Handler, store, idempotency.WithKey(coldstart.Key))
	if err != nil {
		coldstart.Exit(err)
	}
	lambda.Start(handler)
}
