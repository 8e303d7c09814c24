package otelidempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	otelidempotency "github.com/retrysafe/retrysafe/otelidempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// telemetry is an Observer over the SDK, with an in-memory span recorder
// and a manual metric reader.
type telemetry struct {
	obs    *otelidempotency.Observer
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	var err error
	tel.obs, err = otelidempotency.New(otelidempotency.WithTracerProvider(tel.tp), otelidempotency.WithMeterProvider(mp))
	require.NoError(t, err)
	return tel
}

// calls returns the call spans, in the order they ended.
func (tel *telemetry) calls() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if strings.HasPrefix(s.Name(), "idempotent ") {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// counts returns the retrysafe.calls counter by outcome.
func (tel *telemetry) counts(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "retrysafe.calls" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				o, _ := dp.Attributes.Value(otelidempotency.AttrOutcome)
				if w, _ := dp.Attributes.Value(otelidempotency.AttrWaited); w.AsBool() {
					out["waited"] += dp.Value
				}
				out[o.AsString()] += dp.Value
			}
		}
	}
	return out
}

// histogram returns the data points of a histogram.
func (tel *telemetry) histogram(t *testing.T, name string) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data.(metricdata.Histogram[float64]).DataPoints
			}
		}
	}
	return nil
}

type order struct {
	OrderID string `json:"order_id"`
	Card    string `json:"card"`
	Amount  int    `json:"amount"`
}

// secret is a value of the input that must never reach an attribute.
const secret = "4111-1111-1111-1111"

func quiet() idempotency.Option { return idempotency.WithLogger(slog.New(slog.DiscardHandler)) }

// Every outcome reaches the span and the counter.
func TestOutcomes(t *testing.T) {
	tel := newTelemetry(t)
	store := faultstore.New(memory.New())
	boom := errors.New("boom")
	runs := 0
	h, err := idempotency.Wrap(func(ctx context.Context, o order) (string, error) {
		runs++
		switch o.OrderID {
		case "fails":
			return "", boom
		case "declined":
			return "", idempotency.Permanent(boom)
		}
		return "done " + o.OrderID, nil
	}, store, idempotency.WithKey("order_id"), idempotency.WithPayloadValidation("amount"),
		idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs), quiet())
	require.NoError(t, err)
	call := func(o order) { _, _ = h(t.Context(), o) }

	call(order{OrderID: "o-1", Card: secret, Amount: 1}) // new
	call(order{OrderID: "o-1", Card: secret, Amount: 1}) // replay
	call(order{OrderID: "o-1", Card: secret, Amount: 2}) // payload_mismatch
	call(order{Card: secret})                            // no_key
	call(order{OrderID: "fails", Card: secret})          // handler_error
	call(order{OrderID: "declined", Card: secret})       // new (recorded)
	call(order{OrderID: "declined", Card: secret})       // recorded_error
	store.Fault = faultstore.On(faultstore.OpPut, 0, faultstore.FailBefore)
	call(order{OrderID: "o-2", Card: secret}) // store_error
	store.Fault = faultstore.On(faultstore.OpUpdate, 0, faultstore.FailBefore)
	call(order{OrderID: "o-3", Card: secret}) // completion_failed
	call(order{OrderID: "o-3", Card: secret}) // in_progress: the reservation stays
	store.Fault = nil

	fenced, err := idempotency.Wrap(func(context.Context, order) (string, error) { return "late", nil },
		fencingStore{memory.New()}, idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs), quiet())
	require.NoError(t, err)
	_, _ = fenced(t.Context(), order{OrderID: "o-4", Card: secret}) // fenced_out

	assert.Equal(t, map[string]int64{
		"new": 2, "replay": 1, "payload_mismatch": 1, "no_key": 1, "handler_error": 1, "recorded_error": 1,
		"store_error": 1, "completion_failed": 1, "in_progress": 1, "fenced_out": 1,
	}, tel.counts(t))

	var outcomes []string
	for _, s := range tel.calls() {
		o, ok := attr(s, otelidempotency.AttrOutcome)
		require.True(t, ok)
		outcomes = append(outcomes, o.AsString())
		switch o.AsString() {
		case "handler_error", "store_error", "completion_failed", "fenced_out":
			assert.Equal(t, codes.Error, s.Status().Code, o.AsString())
		default:
			assert.NotEqual(t, codes.Error, s.Status().Code, o.AsString())
		}
		if o.AsString() == "replay" {
			r, _ := attr(s, otelidempotency.AttrReplayed)
			assert.True(t, r.AsBool())
		}
	}
	assert.Equal(t, []string{"new", "replay", "payload_mismatch", "no_key", "handler_error", "new", "recorded_error",
		"store_error", "completion_failed", "in_progress", "fenced_out"}, outcomes)
	assertNoKeyMaterial(t, tel)

	ops := map[string]bool{}
	for _, dp := range tel.histogram(t, "retrysafe.store.request.duration") {
		op, _ := dp.Attributes.Value(otelidempotency.AttrStoreOperation)
		res, _ := dp.Attributes.Value(otelidempotency.AttrStoreResult)
		ops[op.AsString()+"/"+res.AsString()] = true
	}
	for _, want := range []string{"put/ok", "put/conflict", "put/error", "update/ok", "update/error", "delete/ok"} {
		assert.True(t, ops[want], "store requests %s measured: %v", want, ops)
	}
}

// assertNoKeyMaterial checks every attribute of every span and event for
// the input's values and the key material: only the key's hash appears.
func assertNoKeyMaterial(t *testing.T, tel *telemetry) {
	t.Helper()
	check := func(where string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			v := kv.Value.Emit()
			for _, bad := range []string{secret, "o-1", "o-2", "o-3", "o-4", "declined", `"`} {
				assert.NotContains(t, v, bad, "%s: attribute %s", where, kv.Key)
			}
		}
	}
	for _, s := range tel.spans.Ended() {
		check(s.Name(), s.Attributes())
		for _, e := range s.Events() {
			check(s.Name()+"/"+e.Name, e.Attributes)
		}
		if h, ok := attr(s, otelidempotency.AttrKeyHash); ok {
			assert.Regexp(t, `^[0-9a-f]{64}$`, h.AsString())
		}
	}
}

// The call's span is a child of the caller's, the phases are its
// children, and the function's own spans nest under it.
func TestNesting(t *testing.T) {
	tel := newTelemetry(t)
	tracer := tel.tp.Tracer("test")
	h, err := idempotency.Wrap(func(ctx context.Context, o order) (string, error) {
		_, span := tracer.Start(ctx, "charge card")
		time.Sleep(time.Millisecond)
		span.End()
		return "done", nil
	}, memory.New(), idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs))
	require.NoError(t, err)
	ctx, parent := tracer.Start(t.Context(), "request")
	_, err = h(ctx, order{OrderID: "o-1"})
	require.NoError(t, err)
	parent.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range tel.spans.Ended() {
		byName[s.Name()] = s
	}
	callSpan := byName["idempotent orders"]
	require.NotNil(t, callSpan)
	assert.Equal(t, byName["request"].SpanContext().SpanID(), callSpan.Parent().SpanID(), "a child of the caller's span")
	for _, name := range []string{"reserve", "run", "complete", "charge card"} {
		s, ok := byName[name]
		require.True(t, ok, name)
		assert.Equal(t, callSpan.SpanContext().SpanID(), s.Parent().SpanID(), "%s is a child of the call's span", name)
		assert.Equal(t, callSpan.SpanContext().TraceID(), s.SpanContext().TraceID())
	}
	assert.False(t, byName["run"].StartTime().After(byName["charge card"].StartTime()), "run spans the function's own work")
	assert.False(t, byName["run"].EndTime().Before(byName["charge card"].EndTime()))
	var events []string
	for _, e := range callSpan.Events() {
		events = append(events, e.Name)
	}
	assert.Equal(t, []string{"store.put", "store.update"}, events)
}

// Waiting is measured, and a call that waited counts as waited.
func TestWait(t *testing.T) {
	tel := newTelemetry(t)
	store := memory.New()
	entered, release := make(chan struct{}), make(chan struct{})
	handler := func(ctx context.Context, o order) (string, error) {
		if o.Amount == 1 {
			close(entered)
			<-release
		}
		return "done", nil
	}
	opts := []idempotency.WrapOption{idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"),
		idempotency.WithWait(time.Minute), idempotency.WithObserver(tel.obs)}
	h, err := idempotency.Wrap(handler, store, opts...)
	require.NoError(t, err)
	// The second call goes through another store value over the same
	// records, so that it finds the key in progress in the store (a
	// conflict it reports) rather than in the process, and then waits.
	conflicted := make(chan struct{})
	var once sync.Once
	onConflict := idempotency.WithObserver(idempotency.ObserverFunc(func(_ context.Context, e idempotency.Event) {
		if e.Kind == idempotency.EventStoreRequest && errors.Is(e.Err, persistence.ErrConflict) {
			once.Do(func() { close(conflicted) })
		}
	}))
	waiting, err := idempotency.Wrap(handler, faultstore.New(store), append(opts, onConflict)...)
	require.NoError(t, err)

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h(context.Background(), order{OrderID: "o-1", Amount: 1})
	}()
	<-entered
	waiter := make(chan error)
	go func() {
		_, err := waiting(context.Background(), order{OrderID: "o-1", Amount: 2})
		waiter <- err
	}()
	<-conflicted // the second call found the key in progress: it waits
	close(release)
	<-done
	require.NoError(t, <-waiter)
	counts := tel.counts(t)
	assert.Equal(t, int64(1), counts["waited"])
	waits := tel.histogram(t, "retrysafe.wait.duration")
	require.Len(t, waits, 1)
	assert.Equal(t, uint64(1), waits[0].Count)
	res, _ := waits[0].Attributes.Value(otelidempotency.AttrWaitResult)
	assert.Equal(t, "done", res.AsString())
}

// The duration histograms have buckets from milliseconds to tens of
// seconds, the SDK's readers see them, and calls of different durations
// land in different buckets (in a bubble, where time is exact).
func TestDurationBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry(t)
		h, err := idempotency.Wrap(func(ctx context.Context, o order) (string, error) {
			time.Sleep(30 * time.Millisecond)
			return "done", nil
		}, memory.New(), idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs))
		require.NoError(t, err)
		for range 2 {
			_, err := h(t.Context(), order{OrderID: "o-1"}) // new, then replay
			require.NoError(t, err)
		}
		for _, name := range []string{"retrysafe.call.duration", "retrysafe.store.request.duration"} {
			for _, dp := range tel.histogram(t, name) {
				assert.Equal(t, otelidempotency.DurationBuckets(), dp.Bounds, name)
			}
		}
		calls := map[string][]uint64{}
		for _, dp := range tel.histogram(t, "retrysafe.call.duration") {
			o, _ := dp.Attributes.Value(otelidempotency.AttrOutcome)
			calls[o.AsString()] = dp.BucketCounts
		}
		bucket := func(counts []uint64) int {
			for i, n := range counts {
				if n > 0 {
					return i
				}
			}
			return -1
		}
		bounds := otelidempotency.DurationBuckets()
		assert.Equal(t, 0, bucket(calls["replay"]), "a replay takes no time here: the first bucket, up to %vs", bounds[0])
		i := bucket(calls["new"])
		require.Positive(t, i, "the new call, 30ms, in a bucket of its own")
		assert.True(t, bounds[i-1] < 0.03 && 0.03 <= bounds[i], "30ms in (%v, %v]", bounds[i-1], bounds[i])
	})
}

// completion_failed and fenced_out set the call span's status to Error,
// and record the error there too, with the function's result returned.
func TestFailedFinalWriteIsRecordedOnTheCallSpan(t *testing.T) {
	tel := newTelemetry(t)
	store := faultstore.New(memory.New())
	h, err := idempotency.Wrap(func(context.Context, order) (string, error) { return "done", nil },
		store, idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs), quiet())
	require.NoError(t, err)
	store.Fault = faultstore.On(faultstore.OpUpdate, 0, faultstore.FailBefore)
	_, err = h(t.Context(), order{OrderID: "o-1"})
	require.NoError(t, err, "the result is returned all the same")

	fenced, err := idempotency.Wrap(func(context.Context, order) (string, error) { return "late", nil },
		fencingStore{memory.New()}, idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs), quiet())
	require.NoError(t, err)
	_, err = fenced(t.Context(), order{OrderID: "o-2"})
	require.NoError(t, err)

	spans := tel.calls()
	require.Len(t, spans, 2)
	for i, want := range []struct{ outcome, message string }{
		{"completion_failed", "faultstore"},
		{"fenced_out", persistence.ErrFenced.Error()},
	} {
		s := spans[i]
		o, _ := attr(s, otelidempotency.AttrOutcome)
		require.Equal(t, want.outcome, o.AsString())
		assert.Equal(t, codes.Error, s.Status().Code)
		assert.Contains(t, exceptions(s), want.message, "%s: the error is recorded where the status is set", want.outcome)
	}
}

// exceptions returns the messages of the errors recorded on s.
func exceptions(s sdktrace.ReadOnlySpan) string {
	var out []string
	for _, e := range s.Events() {
		if e.Name != "exception" {
			continue
		}
		for _, kv := range e.Attributes {
			if kv.Key == "exception.message" {
				out = append(out, kv.Value.AsString())
			}
		}
	}
	return strings.Join(out, "; ")
}

// The final write's span is named by what it did: a fenced release is a
// release, and a commit is a commit, done or not.
func TestFinalWritePhases(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		store   persistence.Store
		fail    bool // the function fails
		stage   bool // the function stages a write (WithTransactions)
		outcome string
		phases  []string
		failed  []string // the phases whose status is Error
	}{
		{"completed", memory.New(), false, false, "new", []string{"reserve", "run", "complete"}, nil},
		{"released", memory.New(), true, false, "handler_error", []string{"reserve", "run", "release"}, []string{"run"}},
		{"completion fenced", fencingStore{memory.New()}, false, false, "fenced_out", []string{"reserve", "run", "complete"}, []string{"complete"}},
		{"release fenced", fencingStore{memory.New()}, true, false, "fenced_out", []string{"reserve", "run", "release"}, []string{"run", "release"}},
		{"committed", committingStore{memory.New()}, false, true, "new", []string{"reserve", "run", "commit"}, nil},
		{"commit fenced", committingStore{fencingStore{memory.New()}}, false, true, "fenced_out", []string{"reserve", "run", "commit"}, []string{"commit"}},
		{"commit canceled", refusingStore{memory.New()}, false, true, "not_committed", []string{"reserve", "run", "commit", "release"}, []string{"commit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel := newTelemetry(t)
			opts := []idempotency.WrapOption{idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs), quiet()}
			if tc.stage {
				opts = append(opts, idempotency.WithTransactions())
			}
			h, err := idempotency.Wrap(func(ctx context.Context, o order) (string, error) {
				if tc.stage {
					if err := persistence.Stage(ctx, "a write"); err != nil {
						return "", err
					}
				}
				if tc.fail {
					return "", boom
				}
				return "done", nil
			}, tc.store, opts...)
			require.NoError(t, err)
			_, _ = h(t.Context(), order{OrderID: "o-1"})

			var phases []string
			for _, s := range tel.spans.Ended() {
				if strings.HasPrefix(s.Name(), "idempotent ") {
					o, _ := attr(s, otelidempotency.AttrOutcome)
					assert.Equal(t, tc.outcome, o.AsString())
					continue
				}
				phases = append(phases, s.Name())
				if slices.Contains(tc.failed, s.Name()) {
					assert.Equal(t, codes.Error, s.Status().Code, s.Name())
				} else {
					assert.NotEqual(t, codes.Error, s.Status().Code, s.Name())
				}
			}
			assert.Equal(t, tc.phases, phases)
		})
	}
}

// Every step is a span, with its name and whether it ran or replayed.
func TestStepSpans(t *testing.T) {
	tel := newTelemetry(t)
	fail := true
	h, err := idempotency.Wrap(func(ctx context.Context, o order) (string, error) {
		charge, err := idempotency.Step(ctx, "charge", func(context.Context) (string, error) { return "ch_1", nil })
		if err != nil {
			return "", err
		}
		if fail {
			fail = false
			return "", errors.New("the ledger is down")
		}
		return idempotency.Step(ctx, "ledger", func(context.Context) (string, error) { return charge + " booked", nil })
	}, memory.New(), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs), quiet())
	require.NoError(t, err)
	_, err = h(t.Context(), order{OrderID: "o-1"})
	require.Error(t, err)
	out, err := h(t.Context(), order{OrderID: "o-1"})
	require.NoError(t, err)
	assert.Equal(t, "ch_1 booked", out)

	var steps []string
	for _, s := range tel.spans.Ended() {
		if name, ok := attr(s, "retrysafe.step.name"); ok {
			o, _ := attr(s, otelidempotency.AttrOutcome)
			r, _ := attr(s, otelidempotency.AttrReplayed)
			steps = append(steps, fmt.Sprintf("%s %s %s %v", s.Name(), name.AsString(), o.AsString(), r.AsBool()))
		}
	}
	assert.Equal(t, []string{"step charge charge new false", "step charge charge replay true", "step ledger ledger new false"}, steps)
}

// The tracer's and the meter's scope carry the module's version.
func TestScopeVersion(t *testing.T) {
	tel := newTelemetry(t)
	h, err := idempotency.Wrap(func(context.Context, order) (string, error) { return "done", nil },
		memory.New(), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs))
	require.NoError(t, err)
	_, err = h(t.Context(), order{OrderID: "o-1"})
	require.NoError(t, err)
	require.NotEmpty(t, otelidempotency.Version())
	for _, s := range tel.spans.Ended() {
		assert.Equal(t, otelidempotency.ScopeName, s.InstrumentationScope().Name)
		assert.Equal(t, otelidempotency.Version(), s.InstrumentationScope().Version)
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(t.Context(), &rm))
	require.NotEmpty(t, rm.ScopeMetrics)
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelidempotency.Version(), sm.Scope.Version)
	}
}

// Through an HTTP adapter and a batch handler: the same spans and counts.
func TestAdapters(t *testing.T) {
	tel := newTelemetry(t)
	api, err := httpapi.WrapAPIGatewayV2(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "created"}, nil
	}, memory.New(), idempotency.WithKeyPrefix("api"), idempotency.WithObserver(tel.obs))
	require.NoError(t, err)
	req := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"idempotency-key": secret}, Body: `{"card":"` + secret + `"}`}
	req.RequestContext.HTTP.Method = "POST"
	for range 2 {
		_, err := api(t.Context(), req)
		require.NoError(t, err)
	}

	sqs, err := batch.SQS(func(context.Context, events.SQSMessage) error { return nil }, memory.New(),
		idempotency.WithKeyPrefix("queue"), idempotency.WithObserver(tel.obs))
	require.NoError(t, err)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: secret}, {MessageId: "m-2", Body: secret}}}
	for range 2 {
		_, err := sqs(t.Context(), ev)
		require.NoError(t, err)
	}

	assert.Equal(t, map[string]int64{"new": 3, "replay": 3}, tel.counts(t))
	prefixes := map[string]int{}
	for _, s := range tel.calls() {
		p, _ := attr(s, otelidempotency.AttrKeyPrefix)
		prefixes[p.AsString()]++
		st, _ := attr(s, otelidempotency.AttrStore)
		assert.Equal(t, "memory", st.AsString(), "the system, as db.system.name names it")
	}
	assert.Equal(t, map[string]int{"api": 2, "queue": 4}, prefixes)
	assertNoKeyMaterial(t, tel)
}

// With transactions, a commit that a staged write's condition cancels
// counts as not_committed.
func TestNotCommitted(t *testing.T) {
	tel := newTelemetry(t)
	h, err := idempotency.Wrap(func(ctx context.Context, o order) (string, error) {
		return "done", persistence.Stage(ctx, "a write")
	}, refusingStore{memory.New()}, idempotency.WithTransactions(), idempotency.WithKeyPrefix("orders"),
		idempotency.WithObserver(tel.obs), quiet())
	require.NoError(t, err)
	_, err = h(t.Context(), order{OrderID: "o-1"})
	require.ErrorAs(t, err, new(*idempotency.CommitError))
	assert.Equal(t, map[string]int64{"not_committed": 1}, tel.counts(t))
	spans := tel.calls()
	require.Len(t, spans, 1)
	assert.Equal(t, codes.Error, spans[0].Status().Code)
}

// Under a caller's span that is not sampled, the call's span is not
// sampled either (the SDK's default, parent-based sampler), and the call
// is still counted.
func TestUnsampledParent(t *testing.T) {
	tel := newTelemetry(t)
	h, err := idempotency.Wrap(func(context.Context, order) (string, error) { return "done", nil },
		memory.New(), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs))
	require.NoError(t, err)
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}}))
	_, err = h(ctx, order{OrderID: "o-1"})
	require.NoError(t, err)
	assert.Empty(t, tel.spans.Ended())
	assert.Equal(t, map[string]int64{"new": 1}, tel.counts(t))
}

// fencingStore refuses every completion and release, as a store whose
// record another call has taken over.
type fencingStore struct{ persistence.Store }

func (fencingStore) Update(context.Context, *persistence.Record) error { return persistence.ErrFenced }
func (fencingStore) Delete(context.Context, string, string) error      { return persistence.ErrFenced }

// committingStore commits the completion, and ignores the staged writes.
type committingStore struct{ persistence.Store }

func (s committingStore) Commit(ctx context.Context, rec *persistence.Record, _ []any) error {
	return s.Update(ctx, rec)
}

// refusingStore commits nothing: every staged write's condition fails.
type refusingStore struct{ *memory.Store }

func (refusingStore) Commit(context.Context, *persistence.Record, []any) error {
	return &persistence.CommitCanceledError{Err: fmt.Errorf("transaction canceled")}
}

// A call refused because its key is held for an operator
// (WithHoldUntilReleased) ends with outcome held, its span in error with a
// held event, so that alerts find it.
func TestHeldKeyIsAnError(t *testing.T) {
	store := memory.New()
	tel := newTelemetry(t)
	then := time.Now().Add(-time.Minute)
	h, err := idempotency.Wrap(func(context.Context, order) (string, error) { return "done", nil },
		store, idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs), quiet())
	require.NoError(t, err)
	// The record a call that timed out leaves, held.
	require.NoError(t, store.Put(t.Context(), &persistence.Record{
		Key: core.Key("orders", "", []byte(`"o-1"`)), Status: persistence.StatusInProgress, Held: true,
		ExpiresAt: then.Add(time.Hour), InProgressExpiresAt: then.Add(time.Second), Token: "timed-out",
	}, then))
	_, err = h(t.Context(), order{OrderID: "o-1"})
	require.ErrorIs(t, err, idempotency.ErrHeld)

	calls := tel.calls()
	require.Len(t, calls, 1)
	o, _ := attr(calls[0], otelidempotency.AttrOutcome)
	assert.Equal(t, "held", o.AsString())
	assert.Equal(t, codes.Error, calls[0].Status().Code)
	assert.True(t, slices.ContainsFunc(calls[0].Events(), func(e sdktrace.Event) bool { return e.Name == "held" }))
	assert.Equal(t, map[string]int64{"held": 1}, tel.counts(t))
}

// A tenant's call (Lambda's tenant isolation mode) has the tenant on its
// span, beside the key's hash, and on no metric: a series per tenant
// would grow with the tenants.
func TestTenantOnSpansOnly(t *testing.T) {
	tel := newTelemetry(t)
	h, err := idempotency.Wrap(func(ctx context.Context, o order) (string, error) { return "ok", nil },
		memory.New(), idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"), idempotency.WithObserver(tel.obs))
	require.NoError(t, err)
	for _, tenant := range []string{"blue/1", ""} {
		ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{TenantID: tenant})
		_, err = h(ctx, order{OrderID: "o-1"})
		require.NoError(t, err)
	}
	calls := tel.calls()
	require.Len(t, calls, 2)
	tenant, ok := attr(calls[0], otelidempotency.AttrTenant)
	require.True(t, ok)
	assert.Equal(t, "blue/1", tenant.AsString())
	_, ok = attr(calls[1], otelidempotency.AttrTenant)
	assert.False(t, ok, "no tenant, no attribute")
	for _, s := range calls {
		hash, ok := attr(s, otelidempotency.AttrKeyHash)
		require.True(t, ok)
		assert.Regexp(t, `^[0-9a-f]{64}$`, hash.AsString())
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(t.Context(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, set := range sets {
				_, ok := set.Value(otelidempotency.AttrTenant)
				assert.False(t, ok, "metric %s has the tenant", m.Name)
				for _, kv := range set.ToSlice() {
					assert.NotContains(t, kv.Value.Emit(), "blue", "metric %s", m.Name)
				}
			}
		}
	}
}
