package order

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// OrdersKeyAttr is the key attribute of the orders table (a string), as
// template.yaml declares OrdersTable.
const OrdersKeyAttr = "processing_id"

// The other attributes of an item of the orders table, all strings.
const (
	attrOrderID        = "order_id"
	attrMessageID      = "message_id"
	attrIdempotencyKey = "idempotency_key"
	attrProcessedAt    = "processed_at"
	attrBody           = "body"
)

// Processing is an item of the orders table: one processing of an order.
type Processing struct {
	// ProcessingID is the item's key, new for each processing.
	ProcessingID string
	// OrderID is the order processed.
	OrderID string
	// MessageID is the SQS message that brought the order.
	MessageID string
	// IdempotencyKey is the order's key in the idempotency table.
	IdempotencyKey string
	// ProcessedAt is when the order was processed.
	ProcessedAt time.Time
	// Body is the message's body.
	Body string
}

// ScanOrders returns every item of an orders table, for local runs and
// tests (the function itself never reads the table). An item without one
// of the attributes that processing writes is an error.
func ScanOrders(ctx context.Context, client awsdynamodb.ScanAPIClient, table string) ([]Processing, error) {
	var out []Processing
	p := awsdynamodb.NewScanPaginator(client, &awsdynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("orders: scanning table %s: %w", table, err)
		}
		for _, item := range page.Items {
			pr, err := decodeProcessing(item)
			if err != nil {
				return nil, fmt.Errorf("orders: table %s: %w", table, err)
			}
			out = append(out, pr)
		}
	}
	return out, nil
}

func decodeProcessing(item map[string]types.AttributeValue) (Processing, error) {
	var missing []string
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		missing = append(missing, name)
		return ""
	}
	pr := Processing{
		ProcessingID:   str(OrdersKeyAttr),
		OrderID:        str(attrOrderID),
		MessageID:      str(attrMessageID),
		IdempotencyKey: str(attrIdempotencyKey),
		Body:           str(attrBody),
	}
	at := str(attrProcessedAt)
	if len(missing) > 0 {
		return Processing{}, fmt.Errorf("item %q without string %s", pr.ProcessingID, strings.Join(missing, ", "))
	}
	var err error
	if pr.ProcessedAt, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return Processing{}, fmt.Errorf("item %s: %s: %w", pr.ProcessingID, attrProcessedAt, err)
	}
	return pr, nil
}

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
