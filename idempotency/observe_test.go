package idempotency_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

type callKey struct{}

// tracer is an Observer that sees calls begin (BeginCall), marks each
// call's context, and records what it sees with the mark of the context it
// comes with.
type tracer struct {
	eventLog
	mu    sync.Mutex
	calls []idempotency.Call
	marks []string
}

func (tr *tracer) BeginCall(ctx context.Context, c idempotency.Call) (context.Context, idempotency.Observer) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.calls = append(tr.calls, c)
	return context.WithValue(ctx, callKey{}, c.Prefix), tr
}

// Call.System names the system of this module's stores, under wrappers
// that Unwrap, and the Go type of others.
func TestCallNamesTheStoreSystem(t *testing.T) {
	for _, tc := range []struct {
		store persistence.Store
		want  string
	}{
		{memory.New(), "memory"},
		{memory.NewCache(faultstore.New(memory.New()), 8), "memory"},
		{otherStore{memory.New()}, "idempotency_test.otherStore"},
	} {
		var tr tracer
		h := mustWrap(t, func(context.Context, order) (receipt, error) { return receipt{}, nil },
			tc.store, idempotency.WithKeyPrefix("obs"), idempotency.WithObserver(&tr))
		_, err := h(t.Context(), o1)
		require.NoError(t, err)
		require.Len(t, tr.calls, 1)
		assert.Equal(t, tc.want, tr.calls[0].System, "%T", tc.store)
	}
}

// otherStore is a store of another module.
type otherStore struct{ persistence.Store }

// sampler is a CallObserver that observes the calls of one prefix only,
// each with an eventLog of its own.
type sampler struct {
	prefix string
	calls  []*eventLog
}

func (s *sampler) BeginCall(ctx context.Context, c idempotency.Call) (context.Context, idempotency.Observer) {
	if c.Prefix != s.prefix {
		return ctx, nil
	}
	l := &eventLog{}
	s.calls = append(s.calls, l)
	return ctx, l
}

func (s *sampler) Observe(context.Context, idempotency.Event) {
	panic("a CallObserver's own Observe sees none of the calls it began")
}

// A CallObserver's BeginCall chooses the Observer of each call: one of
// its own, or none.
func TestCallObserverChoosesEachCallsObserver(t *testing.T) {
	s := &sampler{prefix: "sampled"}
	var all eventLog
	store := memory.New()
	fn := func(ctx context.Context, o order) (receipt, error) { return receipt{ChargeID: "c"}, nil }
	sampled := mustWrap(t, fn, store, idempotency.WithKeyPrefix("sampled"), idempotency.WithObserver(s), idempotency.WithObserver(&all))
	other := mustWrap(t, fn, store, idempotency.WithKeyPrefix("other"), idempotency.WithObserver(s), idempotency.WithObserver(&all))
	for range 2 {
		_, err := sampled(t.Context(), o1)
		require.NoError(t, err)
		_, err = other(t.Context(), o1)
		require.NoError(t, err)
	}
	require.Len(t, s.calls, 2)
	for _, l := range s.calls {
		events := l.events()
		require.NotEmpty(t, events)
		assert.Equal(t, idempotency.EventCallEnded, events[len(events)-1].Kind)
		for _, e := range events {
			assert.True(t, e.Key == "" || strings.HasPrefix(e.Key, "sampled#"), "an event of another call: %s", e.Key)
		}
	}
	ended := 0
	for _, e := range all.events() {
		if e.Kind == idempotency.EventCallEnded {
			ended++
		}
	}
	assert.Equal(t, 4, ended, "the plain Observer sees every call")
}

func (tr *tracer) Observe(ctx context.Context, e idempotency.Event) {
	mark, _ := ctx.Value(callKey{}).(string)
	tr.mu.Lock()
	tr.marks = append(tr.marks, mark)
	tr.mu.Unlock()
	tr.eventLog.Observe(ctx, e)
}

// The events of a first call and of a replay, in order, with their timing
// and the call's context; the function runs with that context too.
func TestObserverSeesCallsAndPhases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr tracer
		var other eventLog
		store := faultstore.New(memory.New()) // no local reads: every replay asks the store
		var seen string
		h := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
			seen, _ = ctx.Value(callKey{}).(string)
			time.Sleep(time.Second)
			return receipt{ChargeID: "c"}, nil
		}, store, idempotency.WithKeyPrefix("obs"), idempotency.WithObserver(&tr), idempotency.WithObserver(&other))
		_, err := h(t.Context(), o1)
		require.NoError(t, err)
		_, err = h(t.Context(), o1)
		require.NoError(t, err)

		assert.Equal(t, "obs", seen, "the function runs with the call's context")
		assert.Equal(t, []idempotency.Call{{Prefix: "obs", Store: "*faultstore.Store", System: "memory"}, {Prefix: "obs", Store: "*faultstore.Store", System: "memory"}}, tr.calls)
		var kinds []idempotency.EventKind
		for _, e := range tr.events() {
			kinds = append(kinds, e.Kind)
		}
		assert.Equal(t, []idempotency.EventKind{
			idempotency.EventStoreRequest, idempotency.EventReserved, idempotency.EventRan,
			idempotency.EventStoreRequest, idempotency.EventSettled, idempotency.EventCallEnded,
			idempotency.EventStoreRequest, idempotency.EventCallEnded,
		}, kinds)
		for _, m := range tr.marks {
			assert.Equal(t, "obs", m, "every event comes with the call's context")
		}
		evs := tr.events()
		assert.Equal(t, "put", evs[0].Op)
		assert.Equal(t, "update", evs[3].Op)
		assert.Equal(t, time.Second, evs[2].Duration, "the function's run")
		assert.Equal(t, idempotency.OutcomeNew, evs[5].Outcome)
		assert.Equal(t, time.Second, evs[5].Duration, "the whole call")
		assert.Equal(t, "complete", evs[4].Op)
		assert.ErrorIs(t, evs[6].Err, persistence.ErrConflict, "the replay's put conflicts")
		assert.Equal(t, idempotency.OutcomeReplay, evs[7].Outcome)
		assert.Len(t, other.events(), len(evs), "every observer sees every event")
	})
}

// Each outcome of a call, as EventCallEnded reports it.
func TestObserverOutcomes(t *testing.T) {
	boom := errors.New("boom")
	outcome := func(t *testing.T, h func(context.Context, order) (receipt, error), ctx context.Context, in order, ev *eventLog) idempotency.Outcome {
		t.Helper()
		_, _ = h(ctx, in)
		evs := ev.events()
		last := evs[len(evs)-1]
		require.Equal(t, idempotency.EventCallEnded, last.Kind)
		return last.Outcome
	}
	t.Run("no key, store error, handler error, stored error, mismatch", func(t *testing.T) {
		var ev eventLog
		store := faultstore.New(memory.New())
		c := counter{fail: func(run int) error {
			switch run { // run 1 is the one without a key
			case 2:
				return boom
			case 3:
				return idempotency.Permanent(boom)
			}
			return nil
		}}
		h := mustWrap(t, c.handle, store, idempotency.WithKey("order_id"), idempotency.WithPayloadValidation("amount"), idempotency.WithObserver(&ev))
		assert.Equal(t, idempotency.OutcomeNoKey, outcome(t, h, t.Context(), order{}, &ev))
		store.Fault = faultstore.On(faultstore.OpPut, 0, faultstore.FailBefore)
		assert.Equal(t, idempotency.OutcomeStoreError, outcome(t, h, t.Context(), o1, &ev))
		store.Fault = nil
		assert.Equal(t, idempotency.OutcomeHandlerError, outcome(t, h, t.Context(), o1, &ev))
		assert.Equal(t, idempotency.OutcomeNew, outcome(t, h, t.Context(), o1, &ev), "a permanent error is stored")
		assert.Equal(t, idempotency.OutcomeRecordedError, outcome(t, h, t.Context(), o1, &ev))
		other := o1
		other.Amount++
		assert.Equal(t, idempotency.OutcomePayloadMismatch, outcome(t, h, t.Context(), other, &ev))
	})
	t.Run("completion failed, fenced out", func(t *testing.T) {
		var ev eventLog
		store := faultstore.New(memory.New())
		var c counter
		h := mustWrap(t, c.handle, store, idempotency.WithObserver(&ev), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
		store.Fault = faultstore.On(faultstore.OpUpdate, 1, faultstore.FailBefore)
		assert.Equal(t, idempotency.OutcomeCompletionFailed, outcome(t, h, t.Context(), o1, &ev))
		fenced := mustWrap(t, c.handle, fencingStore{memory.New()}, idempotency.WithObserver(&ev), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
		assert.Equal(t, idempotency.OutcomeFencedOut, outcome(t, fenced, t.Context(), o1, &ev))
	})
	t.Run("in progress, canceled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var ev eventLog
			g := newGate()
			store := memory.New()
			holder := mustWrap(t, g.handle, store, idempotency.WithKeyPrefix("p"))
			h := mustWrap(t, g.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithObserver(&ev))
			finish := holdKey(t, g, holder, o1)
			assert.Equal(t, idempotency.OutcomeInProgress, outcome(t, h, t.Context(), o1, &ev))
			waiting := mustWrap(t, g.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithObserver(&ev), idempotency.WithWait(time.Minute))
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			assert.Equal(t, idempotency.OutcomeCanceled, outcome(t, waiting, ctx, o1, &ev))
			_, err := finish()
			require.NoError(t, err)
		})
	})
}

// fencingStore refuses every completion and release, as a store whose
// record another call has taken over.
type fencingStore struct{ persistence.Store }

func (fencingStore) Update(context.Context, *persistence.Record) error { return persistence.ErrFenced }
func (fencingStore) Delete(context.Context, string, string) error      { return persistence.ErrFenced }
