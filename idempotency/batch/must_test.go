package batch_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"

	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func TestMustFormsPanicOnBadOptions(t *testing.T) {
	store := memory.New()
	bad := batch.WithKey("[")
	assert.Panics(t, func() { batch.MustSQS(func(context.Context, events.SQSMessage) error { return nil }, store, bad) })
	assert.Panics(t, func() {
		batch.MustKinesis(func(context.Context, events.KinesisEventRecord) error { return nil }, store, bad)
	})
	assert.Panics(t, func() {
		batch.MustDynamoDB(func(context.Context, events.DynamoDBEventRecord) error { return nil }, store, bad)
	})
	assert.NotNil(t, batch.MustSQS(func(context.Context, events.SQSMessage) error { return nil }, store))
}
