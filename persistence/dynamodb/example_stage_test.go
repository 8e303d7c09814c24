package dynamodb_test

import (
	"context"
	"errors"
	"log"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

type transfer struct {
	ID     string `json:"id"`
	From   string `json:"from"`
	Amount int64  `json:"amount"`
}

// A handler whose side effects are DynamoDB writes stages them in the
// completion of its key (idempotency.WithTransactions): the debit, guarded
// by the balance, and the ledger entry commit in one TransactWriteItems
// with the record's completion, so that a function killed after staging
// them leaves neither, and a retry writes them once.
func ExampleStage() {
	store, err := dynamodb.New(awsdynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	if err != nil {
		log.Fatal(err)
	}
	accounts, ledger := "Accounts", "Ledger"
	handler, err := idempotency.Wrap(func(ctx context.Context, t transfer) (string, error) {
		amount := &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Amount, 10)}
		err := dynamodb.Stage(ctx,
			types.TransactWriteItem{Update: &types.Update{
				TableName:                 &accounts,
				Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: t.From}},
				UpdateExpression:          aws.String("SET balance = balance - :amount"),
				ConditionExpression:       aws.String("balance >= :amount"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":amount": amount},
			}},
			types.TransactWriteItem{Put: &types.Put{
				TableName: &ledger,
				Item: map[string]types.AttributeValue{
					"id":     &types.AttributeValueMemberS{Value: t.ID},
					"from":   &types.AttributeValueMemberS{Value: t.From},
					"amount": amount,
				},
			}},
		)
		if err != nil {
			return "", err // not wrapped WithTransactions
		}
		return "transfer " + t.ID + " accepted", nil
	}, store, idempotency.WithKey("id"), idempotency.WithTransactions())
	if err != nil {
		log.Fatal(err) // a store that cannot commit staged writes is refused here
	}

	_, err = handler(context.Background(), transfer{ID: "t-1", From: "alice", Amount: 500})
	var canceled *persistence.CommitCanceledError
	switch {
	case errors.As(err, &canceled):
		// The balance was too low, or the writes were over DynamoDB's
		// limits (a *dynamodb.TransactionTooLargeError): nothing was
		// written, and the key was released. The reasons of DynamoDB's
		// *types.TransactionCanceledException (errors.As) say which
		// write's condition failed.
	case errors.As(err, new(*idempotency.CommitError)):
		// Nothing of this call was written (another call took the key
		// over), or, with (*idempotency.CommitError).Unknown, the reply
		// was lost: retry with the same key.
	}
}
