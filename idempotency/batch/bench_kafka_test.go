package batch_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// BenchmarkKafka measures a redelivered batch of 10 records (each replayed
// from the memory store) with the default key and with the spellings of a
// key from the JSON value: json_value is decoded and the whole record is
// converted, the others decode only what they read.
func BenchmarkKafka(b *testing.B) {
	for _, key := range []string{
		batch.DefaultKafkaKey,
		"json_value.order_id",
		"powertools_json(decoded_value).order_id",
		"powertools_json(powertools_base64(value)).order_id",
	} {
		b.Run(key, func(b *testing.B) {
			handler, err := batch.Kafka(func(context.Context, events.KafkaRecord) error { return nil }, memory.New(),
				idempotency.WithKey(key),
				idempotency.WithLogger(slog.New(slog.DiscardHandler)),
				idempotency.WithKeyPrefix("bench"))
			if err != nil {
				b.Fatal(err)
			}
			event := events.KafkaEvent{Records: map[string][]events.KafkaRecord{}}
			for i := range 10 {
				value := fmt.Sprintf(`{"order_id":"o-%d","amount":4200,"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`, i)
				event.Records["orders-0"] = append(event.Records["orders-0"], events.KafkaRecord{
					Topic: "orders", Offset: int64(i), TimestampType: "CREATE_TIME",
					Key:     base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "customer-%d", i)),
					Value:   base64.StdEncoding.EncodeToString([]byte(value)),
					Headers: []map[string]events.JSONNumberBytes{{"trace": events.JSONNumberBytes("abc")}},
				})
			}
			ctx := context.Background()
			if _, err := handler(ctx, event); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := handler(ctx, event)
				if err != nil || len(resp.BatchItemFailures) != 0 {
					b.Fatal(err, resp)
				}
			}
		})
	}
}
