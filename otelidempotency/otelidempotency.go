// Package otelidempotency traces and measures idempotent calls with
// OpenTelemetry. It sees every call of a function made idempotent by
// [idempotency.Wrap] or an [idempotency.Guard]. It also sees the calls of
// the HTTP adapters of package httpapi and of the batch handlers of
// package batch. It sees them through their observers
// ([idempotency.WithObserver]):
//
//	obs, err := otelidempotency.New() // the global TracerProvider and MeterProvider
//	...
//	handler, err := idempotency.Wrap(charge, store, idempotency.WithObserver(obs))
//
// # Traces
//
// Each call is a span, "idempotent <prefix>", a child of the caller's span
// in the context. The function runs with the call's context, so its own
// spans are children of the call's.
//
// The call's phases are child spans. They are created from the events'
// times when each phase ends. The phases are:
//   - "reserve", the reservation, with all its attempts;
//   - "wait", with WithWait;
//   - "run", the function. Its spans are the call's children, beside
//     "run", since "run" is created once the function has returned.
//   - the final write, named by what it did. It is "complete" for an update
//     with the result or a recorded error. It is "commit" for the
//     transaction of WithTransactions, committed or not. It is "release"
//     for a delete.
//
// A write that another call fenced out keeps its name. Store requests are
// span events, "store.<op>", with their duration and result.
//
// The call span has these attributes:
//   - retrysafe.outcome;
//   - retrysafe.key.prefix;
//   - retrysafe.key.hash, the hash in the record's key. It is never the
//     input, nor the key material it is hashed from.
//   - retrysafe.tenant, the tenant ID that scopes the key, in Lambda's
//     tenant isolation mode. It is never on metrics, where it would make a
//     series per tenant.
//   - retrysafe.store;
//   - retrysafe.replayed.
//
// retrysafe.store names the system, as OpenTelemetry's db.system.name
// does. It is dynamodb, redis or memory ([idempotency.Call]'s System).
//
// The call span's status is Error in two cases. One is when the call
// failed for a reason of the system's or the function's. Those are the
// outcomes store_error, handler_error, fenced_out, completion_failed and
// not_committed. The other is when the key is held for an operator
// (held). A call then ended without an outcome, and someone must check it.
// The span has a held event. In both cases, the span records errors on
// it. It records the final write's error when that write failed. The call
// may have returned its result all the same. It records the error the call
// returned too. Refusals that are the caller's to handle are not errors
// (in_progress, payload_mismatch, no_key). Replays are not errors either.
//
// # Metrics
//
//	Name                              Instrument            Unit     Attributes
//	retrysafe.calls                   counter               {call}   retrysafe.outcome, retrysafe.key.prefix, retrysafe.store, retrysafe.waited
//	retrysafe.call.duration           histogram             s        retrysafe.outcome, retrysafe.key.prefix, retrysafe.store
//	retrysafe.store.request.duration  histogram             s        retrysafe.store.operation, retrysafe.store.result, retrysafe.key.prefix, retrysafe.store
//	retrysafe.wait.duration           histogram             s        retrysafe.wait.result, retrysafe.key.prefix, retrysafe.store
//
// retrysafe.outcome is one of idempotency's outcomes. These are new,
// replay, recorded_error (a recorded error replayed), in_progress,
// payload_mismatch, no_key, store_error, handler_error, fenced_out,
// completion_failed, not_committed, canceled and held. A call that waited
// for another (WithWait) has an outcome of its own, what it got after the
// wait. It also has retrysafe.waited true.
//
// retrysafe.store.operation is put, get, update, delete or commit.
// retrysafe.store.result is ok, conflict, fenced, not_found,
// response_omitted, canceled or error. retrysafe.wait.result is done (the
// outcome came), timeout, canceled or error.
//
// The histograms' buckets resolve milliseconds to tens of seconds. They
// are [DurationBuckets], the boundaries of OpenTelemetry's
// http.server.request.duration with finer ones and wider ones. The finer
// ones, below 5ms, are for store requests. The wider ones, up to a minute,
// are for calls and waits. A View of the SDK's MeterProvider sets others.
//
// # Cost
//
// Take no-op providers, or a trace sampled out while no instrument
// measures. [Observer.BeginCall] then starts the (non-recording) span and
// observes nothing more of the call. The span's start is what a replay
// costs more. That is one allocation with the no-op providers of
// go.opentelemetry.io/otel/trace/noop and metric/noop. It is three with
// the global providers before an SDK is installed (New's default). Their
// tracer allocates its non-recording span. It cannot be asked beforehand
// whether it records. With the SDK, each call makes its spans and
// measurements. That is about 7µs and 30 allocations on a replay, with the
// SDK's own exporters and readers.
package otelidempotency

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// ScopeName is the instrumentation scope of the tracer and the meter; its
// version is [Version].
const ScopeName = "github.com/retrysafe/retrysafe/otelidempotency"

// DurationBuckets returns the boundaries of the duration histograms'
// buckets, in seconds.
func DurationBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60}
}

// The attribute keys.
const (
	AttrOutcome        = attribute.Key("retrysafe.outcome")
	AttrKeyPrefix      = attribute.Key("retrysafe.key.prefix")
	AttrKeyHash        = attribute.Key("retrysafe.key.hash")
	AttrTenant         = attribute.Key("retrysafe.tenant")
	AttrStore          = attribute.Key("retrysafe.store")
	AttrReplayed       = attribute.Key("retrysafe.replayed")
	AttrWaited         = attribute.Key("retrysafe.waited")
	AttrStoreOperation = attribute.Key("retrysafe.store.operation")
	AttrStoreResult    = attribute.Key("retrysafe.store.result")
	AttrWaitResult     = attribute.Key("retrysafe.wait.result")
)

// An Observer traces and measures idempotent calls; it is an
// [idempotency.Observer] that sees each call begin (BeginCall). It is safe
// for concurrent use.
type Observer struct {
	tracer       trace.Tracer
	calls        metric.Int64Counter
	callDuration metric.Float64Histogram
	storeTime    metric.Float64Histogram
	waitTime     metric.Float64Histogram

	// scopes holds what every call of a Guard shares, by idempotency.Call:
	// a map replaced, never changed, when a Guard makes its first call.
	scopes   atomic.Pointer[map[idempotency.Call]*scope]
	scopesMu sync.Mutex
	last     atomic.Pointer[scope] // the scope of the last call begun
}

// A scope is what the calls of one Guard share: their span's name and
// their attributes, made once.
type scope struct {
	call      idempotency.Call
	name      string
	base      attribute.Set // prefix and store
	startOpts []trace.SpanStartOption
}

// An Option configures New.
type Option func(*options)

type options struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider sets the [trace.TracerProvider]. Default
// [otel.GetTracerProvider].
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// WithMeterProvider sets the [metric.MeterProvider]. Default
// [otel.GetMeterProvider].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.mp = mp }
}

// New returns an [Observer] over the providers that opts set. It fails if an
// instrument cannot be created.
func New(opts ...Option) (*Observer, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	meter := o.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version()))
	obs := &Observer{tracer: o.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version()))}
	// The SDK's default buckets (0, 5, 10, 25, ... 10000) are for
	// milliseconds: in seconds, every call under 5s would share one.
	buckets := metric.WithExplicitBucketBoundaries(DurationBuckets()...)
	var errs [4]error
	obs.calls, errs[0] = meter.Int64Counter("retrysafe.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Idempotent calls, by outcome."))
	obs.callDuration, errs[1] = meter.Float64Histogram("retrysafe.call.duration", metric.WithUnit("s"), buckets,
		metric.WithDescription("Duration of idempotent calls, the function's run included."))
	obs.storeTime, errs[2] = meter.Float64Histogram("retrysafe.store.request.duration", metric.WithUnit("s"), buckets,
		metric.WithDescription("Duration of the idempotency store's requests, by operation."))
	obs.waitTime, errs[3] = meter.Float64Histogram("retrysafe.wait.duration", metric.WithUnit("s"), buckets,
		metric.WithDescription("Time calls spent waiting for another call with their key (idempotency.WithWait)."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return obs, nil
}

// A call is the Observer of one call's events: what BeginCall returns.
type call struct {
	*scope
	o         *Observer
	span      trace.Span
	recording bool // span records: the phases are spans too
	waited    atomic.Bool
	keyed     atomic.Bool // the key's attributes are on the span
	// failed is the error of a final write that failed, for the call's
	// span.
	failed atomic.Pointer[error]
}

// BeginCall makes the Observer see each call begin. It starts the call's
// span, and returns the call's own Observer. The span may not record while
// no instrument measures. That is so with no-op providers, or with a trace
// sampled out and metrics off. BeginCall then returns ctx and no Observer,
// and the call costs no more.
func (o *Observer) BeginCall(ctx context.Context, c idempotency.Call) (context.Context, idempotency.Observer) {
	s := o.scope(c)
	spanCtx, span := o.tracer.Start(ctx, s.name, s.startOpts...)
	recording := span.IsRecording()
	if !recording && !o.measuring(ctx) {
		return ctx, nil
	}
	return spanCtx, &call{scope: s, o: o, span: span, recording: recording}
}

// Observe implements idempotency.Observer. The events of calls go to the
// Observers BeginCall returns, so it sees none.
func (o *Observer) Observe(context.Context, idempotency.Event) {}

// measuring reports whether an instrument processes measurements.
func (o *Observer) measuring(ctx context.Context) bool {
	return o.calls.Enabled(ctx) || o.callDuration.Enabled(ctx) || o.storeTime.Enabled(ctx) || o.waitTime.Enabled(ctx)
}

// scope returns the scope of the calls c describes, made on the first.
func (o *Observer) scope(c idempotency.Call) *scope {
	if s := o.last.Load(); s != nil && s.call == c {
		return s
	}
	if m := o.scopes.Load(); m != nil {
		if s, ok := (*m)[c]; ok {
			o.last.Store(s)
			return s
		}
	}
	o.scopesMu.Lock()
	defer o.scopesMu.Unlock()
	old := o.scopes.Load()
	if old != nil {
		if s, ok := (*old)[c]; ok {
			return s
		}
	}
	base := attribute.NewSet(AttrKeyPrefix.String(c.Prefix), AttrStore.String(cmp.Or(c.System, c.Store)))
	s := &scope{
		call: c,
		name: "idempotent " + c.Prefix,
		base: base,
		startOpts: []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(base.ToSlice()...),
		},
	}
	m := make(map[idempotency.Call]*scope, 1)
	if old != nil {
		maps.Copy(m, *old)
	}
	m[c] = s
	o.scopes.Store(&m)
	return s
}

// keyAttributes returns the span attributes of a record key: its hash,
// and the tenant ID that scopes it (docs/keys.md). The tenant goes on
// spans only: as a metric attribute it would make a series per tenant.
func keyAttributes(key string) []attribute.KeyValue {
	i := strings.LastIndexByte(key, '#')
	if i < 0 {
		return nil
	}
	attrs := []attribute.KeyValue{AttrKeyHash.String(key[i+1:])}
	if _, escaped, found := strings.Cut(key[:i], "#tenant="); found {
		if tenant, err := url.PathUnescape(escaped); err == nil {
			attrs = append(attrs, AttrTenant.String(tenant))
		}
	}
	return attrs
}

// Observe implements idempotency.Observer: it records an event of the
// call.
func (c *call) Observe(ctx context.Context, e idempotency.Event) {
	o := c.o
	if c.recording && e.Key != "" && !c.keyed.Load() && c.keyed.CompareAndSwap(false, true) {
		c.span.SetAttributes(keyAttributes(e.Key)...)
	}
	switch e.Kind {
	case idempotency.EventStoreRequest:
		result := storeResult(e.Err)
		if c.recording {
			c.span.AddEvent("store."+e.Op, trace.WithTimestamp(e.Start.Add(e.Duration)), trace.WithAttributes(
				AttrStoreOperation.String(e.Op), AttrStoreResult.String(result),
				attribute.Float64("retrysafe.store.duration", e.Duration.Seconds())))
		}
		o.storeTime.Record(ctx, e.Duration.Seconds(), metric.WithAttributeSet(c.base),
			metric.WithAttributes(AttrStoreOperation.String(e.Op), AttrStoreResult.String(result)))
	case idempotency.EventReserved:
		o.phase(ctx, c, "reserve", e, nil)
	case idempotency.EventRan:
		o.phase(ctx, c, "run", e, e.Err)
	case idempotency.EventWaited:
		c.waited.Store(true)
		o.phase(ctx, c, "wait", e, nil)
		o.waitTime.Record(ctx, e.Duration.Seconds(), metric.WithAttributeSet(c.base),
			metric.WithAttributes(AttrWaitResult.String(waitResult(e.Err))))
	case idempotency.EventSettled:
		// The final write's phase: "complete" (a result or a recorded
		// error), "commit" or "release".
		name := e.Op
		if name == "record" {
			name = "complete"
		}
		if err := e.Err; err != nil && !errors.Is(err, persistence.ErrResponseOmitted) && !errors.Is(err, persistence.ErrCommitCanceled) {
			c.failed.Store(&err)
		}
		o.phase(ctx, c, name, e, e.Err)
	case idempotency.EventRenewed:
		if e.Err != nil {
			c.span.AddEvent("renewal_failed")
		} else {
			c.span.AddEvent("renewed")
		}
	case idempotency.EventStep:
		o.step(ctx, c, e)
	case idempotency.EventCallEnded:
		o.end(ctx, c, e)
	}
}

// step records a step of the function ([idempotency.Step]) as a span,
// "step" and its name, with its outcome: "new" when it ran, "replay"
// when it replayed a stored result.
func (o *Observer) step(ctx context.Context, c *call, e idempotency.Event) {
	if !c.recording {
		return
	}
	_, span := o.tracer.Start(ctx, "step "+e.Op, trace.WithTimestamp(e.Start), trace.WithAttributes(
		attribute.String("retrysafe.step.name", e.Op), AttrOutcome.String(string(e.Outcome)),
		AttrReplayed.Bool(e.Outcome == idempotency.OutcomeReplay || e.Outcome == idempotency.OutcomeRecordedError)))
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

// phase records a phase of the call that has just ended as a child span.
func (o *Observer) phase(ctx context.Context, c *call, name string, e idempotency.Event, err error) {
	if !c.recording || e.Start.IsZero() {
		return
	}
	_, span := o.tracer.Start(ctx, name, trace.WithTimestamp(e.Start))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

// end ends the call's span and counts the call.
func (o *Observer) end(ctx context.Context, c *call, e idempotency.Event) {
	outcome := string(e.Outcome)
	if outcome == "" {
		outcome = "unknown"
	}
	replayed := e.Outcome == idempotency.OutcomeReplay || e.Outcome == idempotency.OutcomeRecordedError
	c.span.SetAttributes(AttrOutcome.String(outcome), AttrReplayed.Bool(replayed))
	if e.Outcome == idempotency.OutcomeHeld {
		c.span.AddEvent("held")
	}
	if failure(e.Outcome) {
		// The final write's error says why, also when the call returned
		// its result, or the function's error, all the same.
		if p := c.failed.Load(); p != nil {
			c.span.RecordError(*p)
		}
		if e.Err != nil {
			c.span.RecordError(e.Err)
		}
		c.span.SetStatus(codes.Error, outcome)
	}
	c.span.End()
	o.calls.Add(ctx, 1, metric.WithAttributeSet(c.base),
		metric.WithAttributes(AttrOutcome.String(outcome), AttrWaited.Bool(c.waited.Load())))
	o.callDuration.Record(ctx, e.Duration.Seconds(), metric.WithAttributeSet(c.base),
		metric.WithAttributes(AttrOutcome.String(outcome)))
}

// failure reports whether a call that ended with outcome failed for a
// reason of the system's or the function's.
func failure(outcome idempotency.Outcome) bool {
	switch outcome {
	case idempotency.OutcomeStoreError, idempotency.OutcomeHandlerError, idempotency.OutcomeFencedOut,
		idempotency.OutcomeCompletionFailed, idempotency.OutcomeNotCommitted, idempotency.OutcomeHeld:
		return true
	}
	return false
}

func storeResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, persistence.ErrConflict):
		return "conflict"
	case errors.Is(err, persistence.ErrFenced):
		return "fenced"
	case errors.Is(err, persistence.ErrNotFound):
		return "not_found"
	case errors.Is(err, persistence.ErrResponseOmitted):
		return "response_omitted"
	case errors.Is(err, persistence.ErrCommitCanceled):
		return "canceled"
	}
	return "error"
}

func waitResult(err error) string {
	switch {
	case err == nil:
		return "done"
	case errors.Is(err, idempotency.ErrInProgress):
		return "timeout"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}
