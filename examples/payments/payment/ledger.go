package payment

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// LedgerKeyAttr is the partition key (type S) of the ledger table: one item
// per payment.
const LedgerKeyAttr = "payment_id"

// The other attributes of a ledger item.
const (
	attrAmount         = "amount"
	attrCurrency       = "currency"
	attrCustomer       = "customer"
	attrIdempotencyKey = "idempotency_key"
	attrCreatedAt      = "created_at"
)

// LedgerClient is the part of the DynamoDB API that DynamoDBLedger uses;
// *dynamodb.Client satisfies it. Its methods are the IAM actions the
// function needs on the ledger table.
type LedgerClient interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

var _ LedgerClient = (*dynamodb.Client)(nil)

// DynamoDBLedger records each charge as one item of a DynamoDB table whose
// key is LedgerKeyAttr.
type DynamoDBLedger struct {
	// Client sends the writes; a *dynamodb.Client. Unused when Staged.
	Client LedgerClient
	// Table is the ledger table's name.
	Table string
	// Staged stages the item in the completion of the payment's
	// idempotency key (ddbstore.Stage), instead of writing it: it is then
	// written with the completion, in one transaction, or not at all. The
	// handler must be wrapped with idempotency.WithTransactions (see
	// Config.Transactions).
	Staged bool
}

var _ Ledger = (*DynamoDBLedger)(nil)

// Record writes the charge's item, on the condition that its payment ID is
// new. Payment IDs are random, so an item with the ID can only have been
// written by an earlier attempt of this same write, one the SDK retried
// after losing its reply: that conflict means the charge is recorded, and
// Record succeeds. When Staged, it stages the write instead.
func (l *DynamoDBLedger) Record(ctx context.Context, c Charge) error {
	item := map[string]types.AttributeValue{
		LedgerKeyAttr: &types.AttributeValueMemberS{Value: c.PaymentID},
		attrAmount:    &types.AttributeValueMemberN{Value: strconv.FormatInt(c.Amount, 10)},
		attrCurrency:  &types.AttributeValueMemberS{Value: c.Currency},
		attrCustomer:  &types.AttributeValueMemberS{Value: c.Customer},
		attrCreatedAt: &types.AttributeValueMemberS{Value: c.CreatedAt.UTC().Format(time.RFC3339Nano)},
	}
	if c.IdempotencyKey != "" {
		item[attrIdempotencyKey] = &types.AttributeValueMemberS{Value: c.IdempotencyKey}
	}
	cond, names := aws.String("attribute_not_exists(#id)"), map[string]string{"#id": LedgerKeyAttr}
	if l.Staged {
		// The commit is one transaction, applied once however often it is
		// sent: the condition only guards against a clashing payment ID.
		err := ddbstore.Stage(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: &l.Table, Item: item, ConditionExpression: cond, ExpressionAttributeNames: names,
		}})
		if err != nil {
			return fmt.Errorf("payment: ledger %s: %w", l.Table, err)
		}
		return nil
	}
	_, err := l.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &l.Table,
		Item:                     item,
		ConditionExpression:      cond,
		ExpressionAttributeNames: names,
	})
	var exists *types.ConditionalCheckFailedException
	if errors.As(err, &exists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("payment: ledger %s: %w", l.Table, err)
	}
	return nil
}

// ScanLedger returns every item of a ledger table, for local runs and
// tests (the function itself never reads the ledger).
func ScanLedger(ctx context.Context, client dynamodb.ScanAPIClient, table string) ([]Charge, error) {
	var charges []Charge
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("payment: scanning ledger %s: %w", table, err)
		}
		for _, item := range page.Items {
			c, err := decodeCharge(item)
			if err != nil {
				return nil, err
			}
			charges = append(charges, c)
		}
	}
	return charges, nil
}

func decodeCharge(item map[string]types.AttributeValue) (Charge, error) {
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	var c Charge
	c.PaymentID = str(LedgerKeyAttr)
	c.Currency = str(attrCurrency)
	c.Customer = str(attrCustomer)
	c.IdempotencyKey = str(attrIdempotencyKey)
	if n, ok := item[attrAmount].(*types.AttributeValueMemberN); ok {
		amount, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return Charge{}, fmt.Errorf("payment: ledger item %s: amount %q: %w", c.PaymentID, n.Value, err)
		}
		c.Amount = amount
	}
	if t, err := time.Parse(time.RFC3339Nano, str(attrCreatedAt)); err == nil {
		c.CreatedAt = t
	}
	return c, nil
}

// CreateLedgerTable creates a ledger table (key LedgerKeyAttr, on-demand
// capacity) and waits until it is ACTIVE, for local runs against dynalite
// or DynamoDB Local; deployments get theirs from template.yaml. An
// existing table is not an error.
func CreateLedgerTable(ctx context.Context, client interface {
	dynamodb.DescribeTableAPIClient
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(LedgerKeyAttr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(LedgerKeyAttr), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("payment: creating ledger table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		return fmt.Errorf("payment: waiting for ledger table %s: %w", table, err)
	}
	return nil
}
