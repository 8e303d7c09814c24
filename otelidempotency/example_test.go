package otelidempotency_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrysafe/retrysafe/idempotency"
	otelidempotency "github.com/retrysafe/retrysafe/otelidempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A charge made idempotent, traced: the first call reserves the key, runs
// the charge and completes; the retry is answered from the store (its
// request is an event of its span).
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	obs, err := otelidempotency.New(otelidempotency.WithTracerProvider(tp), otelidempotency.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	type charge struct {
		OrderID string `json:"order_id"`
		Amount  int    `json:"amount"`
	}
	handler := idempotency.Must(idempotency.Wrap(func(ctx context.Context, c charge) (string, error) {
		return "charged " + c.OrderID, nil
	}, memory.New(), idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("charges"), idempotency.WithObserver(obs)))

	for range 2 {
		if _, err := handler(context.Background(), charge{OrderID: "ord_1", Amount: 1999}); err != nil {
			panic(err)
		}
	}
	for _, s := range spans.Ended() {
		outcome := ""
		for _, kv := range s.Attributes() {
			if kv.Key == otelidempotency.AttrOutcome {
				outcome = " " + kv.Value.AsString()
			}
		}
		fmt.Printf("%s%s\n", s.Name(), outcome)
	}
	// Output:
	// reserve
	// run
	// complete
	// idempotent charges new
	// idempotent charges replay
}
