package dynamodb_test

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// cfg stands for the configuration a function loads at start-up with
// config.LoadDefaultConfig (package github.com/aws/aws-sdk-go-v2/config),
// which honours AWS_ENDPOINT_URL_DYNAMODB: the same code then runs against
// DynamoDB Local, dynalite or LocalStack.
var cfg aws.Config

// A store on a table named by the environment, with Powertools' attribute
// names.
func ExampleNew() {
	store, err := dynamodb.New(awsdynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	if err != nil {
		log.Fatal(err)
	}
	_ = store // pass it to idempotency.Wrap
}

// A store in a table shared with other data: the partition key "pk" holds
// "idempotency#<function name>", the sort key "sk" holds the record's key.
func ExampleNew_sortKey() {
	store, err := dynamodb.New(awsdynamodb.NewFromConfig(cfg), "AppTable", func(o *dynamodb.Options) {
		o.KeyAttr = "pk"
		o.SortKeyAttr = "sk"
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}

// Creating a table for local runs, for example against dynalite started
// with `npx dynalite --port 4567` and AWS_ENDPOINT_URL_DYNAMODB set to
// http://127.0.0.1:4567. Production tables come from the SAM or CDK
// template instead.
func ExampleCreateTable() {
	if err := dynamodb.CreateTable(context.Background(), awsdynamodb.NewFromConfig(cfg), "IdempotencyTable"); err != nil {
		log.Fatal(err)
	}
}
