package dynamotest_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	store "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestCapabilities checks what each kind says its servers do against what
// they do.
func TestCapabilities(t *testing.T) {
	for _, kind := range dynamotest.Kinds {
		t.Run(kind.Name, func(t *testing.T) {
			srv := kind.Shared(t)
			require.Same(t, kind, srv.Kind)
			require.NotEmpty(t, srv.Version)
			table := srv.NewTable(t, func(ctx context.Context, client *dynamodb.Client, name string) error {
				return store.CreateTable(ctx, client, name)
			})
			client := srv.NewClient()

			item := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k" + rand.Text()}}
			_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item})
			require.NoError(t, err)
			_, err = client.PutItem(t.Context(), &dynamodb.PutItemInput{
				TableName: &table, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)"),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			})
			var failed *types.ConditionalCheckFailedException
			require.ErrorAs(t, err, &failed)
			require.Equal(t, srv.ReturnsOldItem, len(failed.Item) > 0, "ReturnsOldItem")

			_, err = client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: &table, Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "tx" + rand.Text()}}}},
			}})
			var apiErr smithy.APIError
			if err != nil && !(errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnknownOperationException") {
				require.NoError(t, err)
			}
			require.Equal(t, srv.Transactions, err == nil, "Transactions: %v", err)
		})
	}
}

func TestLookup(t *testing.T) {
	for _, kind := range dynamotest.Kinds {
		got, err := dynamotest.Lookup(kind.Name)
		require.NoError(t, err)
		require.Same(t, kind, got)
	}
	_, err := dynamotest.Lookup("localstack")
	require.ErrorContains(t, err, `unknown server "localstack" (want dynalite or dynamodb-local)`)
}
