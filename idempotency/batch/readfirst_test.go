package batch_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// A message that SQS delivers again (ApproximateReceiveCount above 1) is
// likely a retry: its completed record is read, which costs a read unit,
// and not written to, which costs a write unit per KB of the record even
// when the write's condition fails. A redelivered message that never
// completed goes on to the reservation. Counted on DynamoDB Local.
func TestRedeliveredSQSMessageIsAnsweredByARead(t *testing.T) {
	srv := dynamotest.DynamoDBLocal.Shared(t)
	name := srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
		return dynamodb.CreateTable(ctx, client, name)
	})
	var counter dynalite.Counter
	store, err := dynamodb.New(srv.NewClient(counter.Register), name)
	require.NoError(t, err)
	rc := &recorder{}
	handler, err := batch.SQS(func(ctx context.Context, m events.SQSMessage) error {
		return rc.process(ctx, run{order: orderOf([]byte(m.Body)), id: m.MessageId})
	}, store, baseOpts(nil)...)
	require.NoError(t, err)

	deliver := func(n, receiveCount int) {
		t.Helper()
		counter.Reset()
		m := events.SQSMessage{
			MessageId:      sqsID(n),
			Body:           spec{n: n, order: "o-" + strconv.Itoa(n)}.payload(),
			EventSourceARN: "arn:aws:sqs:us-west-2:123456789012:orders",
			Attributes:     map[string]string{"ApproximateReceiveCount": strconv.Itoa(receiveCount)},
		}
		resp, err := handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{m}})
		require.NoError(t, err)
		require.Empty(t, resp.BatchItemFailures)
	}

	deliver(1, 1)
	assert.Equal(t, map[string]int{"PutItem": 1, "UpdateItem": 1}, counter.Snapshot(), "first delivery")
	deliver(1, 2)
	assert.Equal(t, map[string]int{"GetItem": 1}, counter.Snapshot(), "redelivery of a completed message")
	assert.Equal(t, []string{"o-1"}, orders(rc.takeRuns()))

	// Delivered again, but its first delivery never reached the store.
	deliver(2, 2)
	assert.Equal(t, map[string]int{"GetItem": 1, "PutItem": 1, "UpdateItem": 1}, counter.Snapshot(), "redelivery of a message never run")
	assert.Equal(t, []string{"o-2"}, orders(rc.takeRuns()))
}
