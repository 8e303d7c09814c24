package batch_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// BenchmarkSQS measures the batch layer over the memory store, per batch
// of 10 messages keyed by an order ID in the body: new orders (each record
// reserved and completed), a redelivered batch (each record replayed), and
// new orders with WithParallelism(4).
func BenchmarkSQS(b *testing.B) {
	for _, bc := range []struct {
		name        string
		replay      bool
		parallelism int
	}{
		{"new", false, 1},
		{"redelivered", true, 1},
		{"new-parallel4", false, 4},
	} {
		b.Run(bc.name, func(b *testing.B) {
			handler, err := batch.SQS(func(context.Context, events.SQSMessage) error { return nil }, memory.New(),
				idempotency.WithKey("powertools_json(body).order_id"),
				batch.WithParallelism(bc.parallelism),
				idempotency.WithLogger(slog.New(slog.DiscardHandler)),
				idempotency.WithKeyPrefix("bench"))
			if err != nil {
				b.Fatal(err)
			}
			event := func(n int) events.SQSEvent {
				var e events.SQSEvent
				for i := range 10 {
					e.Records = append(e.Records, events.SQSMessage{
						MessageId: fmt.Sprintf("m-%d-%d", n, i),
						Body:      fmt.Sprintf(`{"order_id":"o-%d-%d","amount":4200}`, n, i),
					})
				}
				return e
			}
			fixed := event(-1)
			ctx := context.Background()
			if _, err := handler(ctx, fixed); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				e := fixed
				if !bc.replay {
					b.StopTimer()
					e = event(n)
					n++
					b.StartTimer()
				}
				resp, err := handler(ctx, e)
				if err != nil || len(resp.BatchItemFailures) != 0 {
					b.Fatal(err, resp)
				}
			}
		})
	}
}
