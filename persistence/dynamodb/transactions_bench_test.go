package dynamodb_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// BenchmarkTransactionsDynamoDBLocal measures a first call whose side
// effect is one ledger entry in DynamoDB, against DynamoDB Local (dynalite
// has no transactions): written directly by the handler (PutItem, PutItem,
// UpdateItem), and staged in the completion (PutItem, TransactWriteItems),
// next to a first call without a side effect (PutItem, UpdateItem). Each
// reports its requests per call (requests/op) and its median and 99th
// percentile besides ns/op.
//
//	go test -run '^$' -bench TransactionsDynamoDBLocal -benchtime 1000x ./persistence/dynamodb/
func BenchmarkTransactionsDynamoDBLocal(b *testing.B) {
	srv := server{dynamotest.DynamoDBLocal.Shared(b)}
	_, store, counter := srv.setup(b)
	entries := srv.counterTable(b)
	client := srv.NewClient(counter.Register)
	entry := func(p paytest.Payment) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"name":   &types.AttributeValueMemberS{Value: p.OrderID},
			"amount": &types.AttributeValueMemberN{Value: "4200"},
		}
	}
	direct := func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
		_, err := client.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: &entries, Item: entry(p),
			ConditionExpression: aws.String("attribute_not_exists(#n)"), ExpressionAttributeNames: map[string]string{"#n": "name"}})
		return paytest.Charge{ChargeID: "ch_" + p.OrderID, Amount: p.Amount}, err
	}
	staged := func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
		err := dynamodb.Stage(ctx, types.TransactWriteItem{Put: &types.Put{TableName: &entries, Item: entry(p),
			ConditionExpression: aws.String("attribute_not_exists(#n)"), ExpressionAttributeNames: map[string]string{"#n": "name"}}})
		return paytest.Charge{ChargeID: "ch_" + p.OrderID, Amount: p.Amount}, err
	}
	none := func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
		return paytest.Charge{ChargeID: "ch_" + p.OrderID, Amount: p.Amount}, nil
	}
	for _, bc := range []struct {
		name string
		h    func(context.Context, paytest.Payment) (paytest.Charge, error)
		opts []idempotency.WrapOption
	}{
		{"NoSideEffect", none, nil},
		{"Direct", direct, nil},
		{"Staged", staged, []idempotency.WrapOption{idempotency.WithTransactions()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pay := paytest.Wrap(b, bc.h, store, bc.opts...)
			var p paytest.Payment
			counter.Reset()
			calls := 0
			measure(b, func() {
				calls++
				if _, err := pay(b.Context(), p); err != nil {
					b.Fatal(err)
				}
			}, func() { p = paytest.New() })
			if calls > 0 {
				b.ReportMetric(float64(counter.Calls())/float64(calls), "requests/op")
			}
		})
	}
}
