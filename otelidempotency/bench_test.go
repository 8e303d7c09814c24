package otelidempotency_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/testevents"
	otelidempotency "github.com/retrysafe/retrysafe/otelidempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func respond(_ any, req events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	return events.APIGatewayProxyResponse{
		StatusCode: 201,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       `{"payment_id":"pay_123","status":"created"}`,
	}
}

// BenchmarkReplay is idempotency's replay benchmark (an API Gateway event
// of about 1 KB, a JMESPath key, the memory store) without an observer,
// with an Observer over OpenTelemetry's no-op providers, and with one over
// the SDK, its spans to an in-memory exporter and its metrics to a manual
// reader.
func BenchmarkReplay(b *testing.B) {
	noop, err := otelidempotency.New(
		otelidempotency.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelidempotency.WithMeterProvider(metricnoop.NewMeterProvider()))
	if err != nil {
		b.Fatal(err)
	}
	global, err := otelidempotency.New() // no SDK installed: the global providers' defaults
	if err != nil {
		b.Fatal(err)
	}
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	sdk, err := otelidempotency.New(otelidempotency.WithTracerProvider(tp), otelidempotency.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name string
		opts []idempotency.WrapOption
	}{
		{"none", nil},
		{"empty_observer", []idempotency.WrapOption{idempotency.WithObserver(idempotency.ObserverFunc(func(context.Context, idempotency.Event) {}))}},
		{"noop", []idempotency.WrapOption{idempotency.WithObserver(noop)}},
		{"global_default", []idempotency.WrapOption{idempotency.WithObserver(global)}},
		{"sdk", []idempotency.WrapOption{idempotency.WithObserver(sdk)}},
	} {
		b.Run(v.name, func(b *testing.B) {
			opts := append([]idempotency.WrapOption{idempotency.WithKey("powertools_json(body).order_id")}, v.opts...)
			h := idempotency.Must(idempotency.Wrap(func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return respond(ctx, req), nil
			}, memory.New(), opts...))
			in := testevents.APIGatewayOrder("ord_1")
			if _, err := h(b.Context(), in); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h(b.Context(), in); err != nil {
					b.Fatal(err)
				}
				exporter.Reset()
			}
		})
	}
}

// With OpenTelemetry's no-op providers, an Observer costs a replay one
// allocation (the no-op tracer's context), and no events; with the global
// providers before an SDK is installed, three (the global tracer's
// non-recording span, boxed twice, and its context), as the package's
// documentation and the README say.
func TestNoopAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	noop, err := otelidempotency.New(
		otelidempotency.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelidempotency.WithMeterProvider(metricnoop.NewMeterProvider()))
	require.NoError(t, err)
	global, err := otelidempotency.New() // no test installs an SDK globally
	require.NoError(t, err)
	allocs := func(opts ...idempotency.WrapOption) float64 {
		opts = append(opts, idempotency.WithKey("powertools_json(body).order_id"))
		h := idempotency.Must(idempotency.Wrap(func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return respond(ctx, req), nil
		}, memory.New(), opts...))
		in := testevents.APIGatewayOrder("ord_1")
		_, err := h(t.Context(), in)
		require.NoError(t, err)
		return testing.AllocsPerRun(200, func() {
			if _, err := h(t.Context(), in); err != nil {
				t.Fatal(err)
			}
		})
	}
	without, with, withGlobal := allocs(), allocs(idempotency.WithObserver(noop)), allocs(idempotency.WithObserver(global))
	assert.LessOrEqual(t, with, without+1, "allocations of a replay: %.0f without an observer, %.0f with one over no-op providers", without, with)
	assert.LessOrEqual(t, withGlobal, without+3, "allocations of a replay: %.0f without an observer, %.0f with one over the global default providers", without, withGlobal)
}
