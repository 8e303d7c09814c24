package payment_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
)

func TestMain(m *testing.M) { dynalite.Main(m) }

type putClient struct {
	inputs []*dynamodb.PutItemInput
	err    error
}

func (c *putClient) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.inputs = append(c.inputs, in)
	return &dynamodb.PutItemOutput{}, c.err
}

var charge = payment.Charge{
	Payment:        payment.Payment{PaymentID: "pay_1", Amount: 1999, Currency: "EUR", Customer: "cus_42"},
	IdempotencyKey: "payments#abc",
	CreatedAt:      time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600)),
}

func TestDynamoDBLedgerItem(t *testing.T) {
	c := &putClient{}
	l := &payment.DynamoDBLedger{Client: c, Table: "Ledger"}
	require.NoError(t, l.Record(t.Context(), charge))
	require.Len(t, c.inputs, 1)
	in := c.inputs[0]
	assert.Equal(t, "Ledger", *in.TableName)
	assert.Equal(t, map[string]types.AttributeValue{
		"payment_id":      &types.AttributeValueMemberS{Value: "pay_1"},
		"amount":          &types.AttributeValueMemberN{Value: "1999"},
		"currency":        &types.AttributeValueMemberS{Value: "EUR"},
		"customer":        &types.AttributeValueMemberS{Value: "cus_42"},
		"idempotency_key": &types.AttributeValueMemberS{Value: "payments#abc"},
		"created_at":      &types.AttributeValueMemberS{Value: "2026-01-02T02:04:05.000000006Z"},
	}, in.Item)
	assert.Equal(t, "attribute_not_exists(#id)", *in.ConditionExpression)
	assert.Equal(t, map[string]string{"#id": payment.LedgerKeyAttr}, in.ExpressionAttributeNames)
}

func TestDynamoDBLedgerErrors(t *testing.T) {
	c := &putClient{err: &types.ConditionalCheckFailedException{Message: aws.String("exists")}}
	l := &payment.DynamoDBLedger{Client: c, Table: "Ledger"}
	assert.NoError(t, l.Record(t.Context(), charge), "an earlier attempt of this write landed")

	c.err = &types.ResourceNotFoundException{Message: aws.String("no table")}
	err := l.Record(t.Context(), charge)
	var notFound *types.ResourceNotFoundException
	assert.True(t, errors.As(err, &notFound))
	assert.ErrorContains(t, err, "payment: ledger Ledger")
}

func TestDynamoDBLedgerAgainstDynalite(t *testing.T) {
	srv := dynalite.Shared(t)
	client := srv.NewClient()
	table := dynalite.TableName(t)
	require.NoError(t, payment.CreateLedgerTable(t.Context(), client, table))
	require.NoError(t, payment.CreateLedgerTable(t.Context(), client, table), "an existing table is fine")

	l := &payment.DynamoDBLedger{Client: client, Table: table}
	require.NoError(t, l.Record(t.Context(), charge))
	require.NoError(t, l.Record(t.Context(), charge), "a retried write of the same charge")
	second := charge
	second.PaymentID, second.IdempotencyKey = "pay_2", ""
	require.NoError(t, l.Record(t.Context(), second))

	charges, err := payment.ScanLedger(t.Context(), client, table)
	require.NoError(t, err)
	require.Len(t, charges, 2)
	byID := map[string]payment.Charge{}
	for _, c := range charges {
		byID[c.PaymentID] = c
	}
	want := charge
	want.CreatedAt = want.CreatedAt.UTC()
	assert.Equal(t, want, byID["pay_1"])
	assert.Empty(t, byID["pay_2"].IdempotencyKey)
}
