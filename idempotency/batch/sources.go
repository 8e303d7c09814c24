package batch

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// Default key expressions: each record's delivery identity, which stays the
// same when Lambda delivers the record again.
const (
	// DefaultSQSKey is the message ID.
	DefaultSQSKey = "messageId"
	// DefaultKinesisKey is the event ID, "shardId-...:<sequence number>".
	DefaultKinesisKey = "eventID"
	// DefaultDynamoDBKey is the event ID, unique to each stream record.
	DefaultDynamoDBKey = "eventID"
)

var sqsSource = source[events.SQSMessage]{
	name:       "sqs",
	fnName:     "SQS",
	idName:     "messageId",
	defaultKey: DefaultSQSKey,
	describe: func(m *events.SQSMessage) meta {
		// A message received before was likely processed then.
		n, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
		if !strings.HasSuffix(m.EventSourceARN, ".fifo") {
			return meta{id: m.MessageId, redelivered: n > 1}
		}
		return meta{id: m.MessageId, group: m.Attributes["MessageGroupId"], ordered: true, redelivered: n > 1}
	},
}

var kinesisSource = source[events.KinesisEventRecord]{
	name:       "kinesis",
	fnName:     "Kinesis",
	idName:     "kinesis.sequenceNumber",
	defaultKey: DefaultKinesisKey,
	describe: func(r *events.KinesisEventRecord) meta {
		return meta{id: r.Kinesis.SequenceNumber, group: r.Kinesis.PartitionKey, ordered: true}
	},
}

var dynamoDBSource = source[events.DynamoDBEventRecord]{
	name:       "dynamodb",
	fnName:     "DynamoDB",
	idName:     "dynamodb.SequenceNumber",
	defaultKey: DefaultDynamoDBKey,
	describe: func(r *events.DynamoDBEventRecord) meta {
		// The stream keeps the changes of one item in order. encoding/json
		// sorts map keys, so equal keys give equal text; a key that does
		// not encode puts the record in the group of all such records,
		// which errs on the side of order.
		keys, _ := json.Marshal(r.Change.Keys)
		return meta{id: r.Change.SequenceNumber, group: string(keys), ordered: true}
	},
}

// SQS returns a handler for SQS events, for lambda.Start. It runs fn once
// per message, made idempotent with [idempotency.Wrap] over store. It
// reports the messages that failed in an events.SQSEventResponse, so that
// only they are retried. The event source mapping must have
// ReportBatchItemFailures in its FunctionResponseTypes. Without it Lambda
// ignores the response and deletes the whole batch on success. Failed
// messages are then lost.
//
// The key is the message ID unless [idempotency.WithKey] selects another
// (powertools_json(body).order_id, say). A FIFO queue has an
// eventSourceARN ending in ".fifo". On such a queue, the messages of a
// group (attributes.MessageGroupId) that follow a failed one are reported
// as failed without running.
//
// The handler's error is nil except when a failed message has no
// messageId (see the package documentation). SQS returns an error if the
// options are invalid.
func SQS(fn func(context.Context, events.SQSMessage) error, store persistence.Store, opts ...idempotency.BatchOption) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	p, err := newProcessor(&sqsSource, fn, store, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, event events.SQSEvent) (events.SQSEventResponse, error) {
		ids, err := p.process(ctx, event.Records)
		return events.SQSEventResponse{BatchItemFailures: failures(ids, func(id string) events.SQSBatchItemFailure {
			return events.SQSBatchItemFailure{ItemIdentifier: id}
		})}, err
	}, nil
}

// Kinesis returns a handler for Kinesis Data Streams events, for
// lambda.Start. It runs fn once per record, made idempotent with
// [idempotency.Wrap] over store. It reports the records that failed by
// their sequence numbers in an events.KinesisEventResponse. The event
// source mapping must have ReportBatchItemFailures in its
// FunctionResponseTypes.
//
// The key is the record's eventID unless [idempotency.WithKey] selects
// another (powertools_json(powertools_base64(kinesis.data)).id, say).
// Records of a partition key that follow a failed one are reported as
// failed without running. Lambda resumes the shard at the lowest reported
// sequence number. Later records of other partition keys that succeeded
// come again, and are skipped as completed.
//
// The handler's error is nil except when a failed record has no sequence
// number. Kinesis returns an error if the options are invalid.
func Kinesis(fn func(context.Context, events.KinesisEventRecord) error, store persistence.Store, opts ...idempotency.BatchOption) (func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error), error) {
	p, err := newProcessor(&kinesisSource, fn, store, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, event events.KinesisEvent) (events.KinesisEventResponse, error) {
		ids, err := p.process(ctx, event.Records)
		return events.KinesisEventResponse{BatchItemFailures: failures(ids, func(id string) events.KinesisBatchItemFailure {
			return events.KinesisBatchItemFailure{ItemIdentifier: id}
		})}, err
	}, nil
}

// DynamoDB returns a handler for DynamoDB Streams events, for lambda.Start.
// It runs fn once per record, made idempotent with [idempotency.Wrap] over
// store. It reports the records that failed by their sequence numbers in
// an events.DynamoDBEventResponse. The event source mapping must have
// ReportBatchItemFailures in its FunctionResponseTypes.
//
// The key is the record's eventID unless [idempotency.WithKey] selects
// another. Records of an item (dynamodb.Keys) that follow a failed one are
// reported as failed without running. Lambda resumes the shard at the
// lowest reported sequence number. Later records of other items that
// succeeded come again, and are skipped as completed.
//
// The handler's error is nil except when a failed record has no sequence
// number. DynamoDB returns an error if the options are invalid.
func DynamoDB(fn func(context.Context, events.DynamoDBEventRecord) error, store persistence.Store, opts ...idempotency.BatchOption) (func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), error) {
	p, err := newProcessor(&dynamoDBSource, fn, store, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, event events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		ids, err := p.process(ctx, event.Records)
		return events.DynamoDBEventResponse{BatchItemFailures: failures(ids, func(id string) events.DynamoDBBatchItemFailure {
			return events.DynamoDBBatchItemFailure{ItemIdentifier: id}
		})}, err
	}, nil
}

// failures converts identifiers into a source's failure items. The list is
// never nil, so that a full success encodes as "batchItemFailures": [].
func failures[F any](ids []string, item func(string) F) []F {
	out := make([]F, len(ids))
	for i, id := range ids {
		out[i] = item(id)
	}
	return out
}
