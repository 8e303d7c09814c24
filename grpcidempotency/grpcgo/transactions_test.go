package grpcgo_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// ledger writes an entry per order, staged with the completion of the
// call's key (idempotency.WithTransactions).
type ledger struct {
	testpb.UnimplementedOrdersServer
	table string
}

func (l ledger) CreateOrder(ctx context.Context, req *testpb.CreateOrderRequest) (*testpb.Order, error) {
	err := dynamodb.Stage(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName:           aws.String(l.table),
		Item:                map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: req.GetRequestId()}},
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	}})
	if err != nil {
		return nil, err
	}
	return &testpb.Order{Name: "orders/" + req.GetRequestId()}, nil
}

// With idempotency.WithTransactions, the handler's writes commit with its
// result; writes that cannot commit answer UNAVAILABLE (NOT_COMMITTED)
// instead of the response, and leave nothing.
func TestTransactionsCommitWithTheResult(t *testing.T) {
	srv := backends.DynamoDBLocal(t)
	client := srv.NewClient()
	table := srv.NewTable(t, func(ctx context.Context, c *awsdynamodb.Client, name string) error {
		_, err := c.CreateTable(ctx, &awsdynamodb.CreateTableInput{
			TableName:            aws.String(name),
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		return err
	})
	store := backends.DynamoStores(t, srv.NewTable, srv.NewClient)()
	orders := dial(t, serveWith(t, ledger{table: table}, interceptorOf(t, store,
		grpcidempotency.WithGuardOptions(idempotency.WithTransactions()))))
	entries := func() int32 {
		out, err := client.Scan(t.Context(), &awsdynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		return out.Count
	}

	for range 2 {
		resp, err := orders.CreateOrder(t.Context(), &testpb.CreateOrderRequest{RequestId: "k1"})
		require.NoError(t, err)
		assert.Equal(t, "orders/k1", resp.GetName())
	}
	assert.EqualValues(t, 1, entries(), "one entry, and the retry replayed")

	// An entry that is there already makes the commit fail.
	_, err := client.PutItem(t.Context(), &awsdynamodb.PutItemInput{TableName: aws.String(table),
		Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k2"}}})
	require.NoError(t, err)
	_, err = orders.CreateOrder(t.Context(), &testpb.CreateOrderRequest{RequestId: "k2"})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, grpcidempotency.ReasonNotCommitted, reasonOf(err))
	assert.EqualValues(t, 2, entries())
}
