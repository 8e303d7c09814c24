package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// OrdersKeyAttr is the key attribute of the orders table (a string), as
// template.yaml declares OrdersTable.
const OrdersKeyAttr = "processing_id"

// CreateOrdersTable creates the orders table as template.yaml declares it,
// for local runs and tests against a DynamoDB-compatible server, and waits
// until it is active. A table that already exists is kept.
func CreateOrdersTable(ctx context.Context, client interface {
	awsdynamodb.DescribeTableAPIClient
	CreateTable(context.Context, *awsdynamodb.CreateTableInput, ...func(*awsdynamodb.Options)) (*awsdynamodb.CreateTableOutput, error)
}, table string) error {
	_, err := client.CreateTable(ctx, &awsdynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(OrdersKeyAttr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(OrdersKeyAttr), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("orders: creating table %s: %w", table, err)
	}
	// Tables become active asynchronously (in dynalite as in DynamoDB).
	w := awsdynamodb.NewTableExistsWaiter(client, func(o *awsdynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &awsdynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return fmt.Errorf("orders: waiting for table %s: %w", table, err)
	}
	return nil
}
