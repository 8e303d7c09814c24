package batch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// An SQS consumer that processes each order once, keyed by the order ID in
// the message body, and reports only the failed messages. On Lambda:
// lambda.Start(handler), with a DynamoDB store and ReportBatchItemFailures
// on the event source mapping.
func ExampleSQS() {
	processed := map[string]int{}
	outage := true
	processOrder := func(ctx context.Context, msg events.SQSMessage) error {
		var order struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal([]byte(msg.Body), &order); err != nil {
			return err
		}
		if order.OrderID == "o-3" && outage {
			outage = false
			return errors.New("inventory service unavailable")
		}
		processed[order.OrderID]++
		return nil
	}

	handler, err := batch.SQS(processOrder, memory.New(),
		idempotency.WithKey("powertools_json(body).order_id"),
		idempotency.WithLogger(slog.New(slog.DiscardHandler)),
		idempotency.WithKeyPrefix("orders"))
	if err != nil {
		panic(err)
	}

	event := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"order_id": "o-1"}`},
		{MessageId: "m-2", Body: `{"order_id": "o-2"}`},
		{MessageId: "m-3", Body: `{"order_id": "o-3"}`},
		{MessageId: "m-4", Body: `not JSON`},
	}}
	for delivery := 1; delivery <= 2; delivery++ {
		resp, _ := handler(context.Background(), event)
		out, _ := json.Marshal(resp)
		fmt.Printf("delivery %d: %s\n", delivery, out)
	}
	fmt.Println("o-1:", processed["o-1"], "o-2:", processed["o-2"], "o-3:", processed["o-3"])
	// Output:
	// delivery 1: {"batchItemFailures":[{"itemIdentifier":"m-3"},{"itemIdentifier":"m-4"}]}
	// delivery 2: {"batchItemFailures":[{"itemIdentifier":"m-4"}]}
	// o-1: 1 o-2: 1 o-3: 1
}

// On a FIFO queue, a failed message holds back the rest of its message
// group; the other groups go on.
func ExampleSQS_fifo() {
	handler, err := batch.SQS(func(ctx context.Context, msg events.SQSMessage) error {
		if msg.Body == "b-1" {
			return errors.New("failed")
		}
		fmt.Println("processed", msg.Body)
		return nil
	}, memory.New(), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}

	arn := "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
	msg := func(id, group string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: id, EventSourceARN: arn,
			Attributes: map[string]string{"MessageGroupId": group}}
	}
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("a-1", "A"), msg("b-1", "B"), msg("a-2", "A"), msg("b-2", "B"), msg("a-3", "A"),
	}})
	fmt.Println(resp.BatchItemFailures)
	// Output:
	// processed a-1
	// processed a-2
	// processed a-3
	// [{b-1} {b-2}]
}

// A Kinesis consumer keyed by an ID inside the base64 JSON data. Lambda
// resumes the shard at the lowest reported sequence number.
func ExampleKinesis() {
	handler, err := batch.Kinesis(func(ctx context.Context, r events.KinesisEventRecord) error {
		fmt.Printf("processed %s\n", r.Kinesis.Data)
		return nil
	}, memory.New(),
		idempotency.WithKey("powertools_json(powertools_base64(kinesis.data)).id"),
		idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}

	record := func(seq, data string) events.KinesisEventRecord {
		r := events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq}
		r.Kinesis.SequenceNumber, r.Kinesis.PartitionKey, r.Kinesis.Data = seq, "p", []byte(data)
		return r
	}
	event := events.KinesisEvent{Records: []events.KinesisEventRecord{
		record("101", `{"id": 1}`),
		record("102", `{"id": 2}`),
		record("103", `{"id": 1}`), // the same event, put twice by its producer
		record("104", `oops`),
	}}
	resp, _ := handler(context.Background(), event)
	fmt.Println(resp.BatchItemFailures)
	// Output:
	// processed {"id": 1}
	// processed {"id": 2}
	// [{104}]
}

// A DynamoDB Streams consumer. The default key, the record's eventID, tells
// the changes of an item apart.
func ExampleDynamoDB() {
	handler, err := batch.DynamoDB(func(ctx context.Context, r events.DynamoDBEventRecord) error {
		fmt.Println(r.EventName, r.Change.Keys["id"].String(), r.Change.NewImage["status"].String())
		return nil
	}, memory.New(), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}

	change := func(eventID, seq, name, status string) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventID: eventID, EventName: name, Change: events.DynamoDBStreamRecord{
			SequenceNumber: seq,
			Keys:           map[string]events.DynamoDBAttributeValue{"id": events.NewStringAttribute("o-1")},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"id": events.NewStringAttribute("o-1"), "status": events.NewStringAttribute(status)},
		}}
	}
	event := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		change("e1", "100", "INSERT", "placed"),
		change("e2", "200", "MODIFY", "paid"),
	}}
	for range 2 { // the second delivery is skipped
		resp, _ := handler(context.Background(), event)
		fmt.Println(len(resp.BatchItemFailures), "failed")
	}
	// Output:
	// INSERT o-1 placed
	// MODIFY o-1 paid
	// 0 failed
	// 0 failed
}
