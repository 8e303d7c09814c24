package batch_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A Kafka consumer keyed by the order ID in each record's JSON value
// (json_value is the value decoded). A failed record holds back the rest
// of its partition; the other partitions go on. Lambda retries the failed
// partition from the offset reported.
func ExampleKafka() {
	handler, err := batch.Kafka(func(ctx context.Context, r events.KafkaRecord) error {
		value, err := base64.StdEncoding.DecodeString(r.Value)
		if err != nil {
			return err
		}
		var order struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal(value, &order); err != nil {
			return err
		}
		if order.OrderID == "o-3" {
			return errors.New("payment service unavailable")
		}
		fmt.Printf("%s-%d@%d: processed %s\n", r.Topic, r.Partition, r.Offset, order.OrderID)
		return nil
	}, memory.New(),
		idempotency.WithKey("json_value.order_id"),
		idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}

	record := func(partition, offset int64, value string) events.KafkaRecord {
		return events.KafkaRecord{Topic: "orders", Partition: partition, Offset: offset,
			Value: base64.StdEncoding.EncodeToString([]byte(value))}
	}
	event := events.KafkaEvent{EventSource: "aws:kafka", Records: map[string][]events.KafkaRecord{
		"orders-0": {
			record(0, 15, `{"order_id": "o-1"}`),
			record(0, 16, `{"order_id": "o-3"}`),
			record(0, 17, `{"order_id": "o-4"}`),
		},
		"orders-1": {
			record(1, 7, `{"order_id": "o-2"}`),
			record(1, 8, `{"order_id": "o-1"}`), // o-1 again, sent twice by its producer
		},
	}}
	resp, _ := handler(context.Background(), event)
	out, _ := json.Marshal(resp)
	fmt.Println(string(out))
	// Output:
	// orders-0@15: processed o-1
	// orders-1@7: processed o-2
	// {"batchItemFailures":[{"itemIdentifier":{"partition":"orders-0","offset":16}},{"itemIdentifier":{"partition":"orders-0","offset":17}}]}
}
