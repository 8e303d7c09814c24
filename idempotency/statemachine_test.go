package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/internal/testing/testlog"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

var o1 = order{OrderID: "o-1", Customer: "c-1", Amount: 100}

func TestFirstCallRunsAndRetriesReplay(t *testing.T) {
	store := memory.New()
	var c counter
	var ev eventLog
	charge := mustWrap(t, c.handle, store, idempotency.WithObserver(&ev))

	callAndRetry(t, charge, o1, 3)
	assert.Equal(t, 1, c.count())
	assert.Equal(t, []string{"reserved", "complete", "new", "replay", "replay", "replay"}, ev.list())

	// Another input is another key.
	_, err := charge(t.Context(), order{OrderID: "o-2", Amount: 5})
	require.NoError(t, err)
	assert.Equal(t, 2, c.count())
	assert.Equal(t, 2, store.Len())
}

type declinedError struct{ Reason string }

func (e *declinedError) Error() string { return "card declined: " + e.Reason }

func TestHandlerErrorReleasesKeyAndPassesThrough(t *testing.T) {
	store := memory.New()
	declined := &declinedError{Reason: "insufficient funds"}
	c := counter{fail: func(run int) error {
		if run == 1 {
			return declined
		}
		return nil
	}}
	var ev eventLog
	charge := mustWrap(t, c.handle, store, idempotency.WithObserver(&ev))

	got, err := charge(t.Context(), o1)
	require.Same(t, declined, err, "the handler's error must come back unchanged")
	assert.Equal(t, receipt{ChargeID: "partial"}, got, "with the value the handler returned")
	assert.Equal(t, 0, store.Len(), "the key must be released")

	_, err = charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 2, c.count())
	assert.Equal(t, []string{"reserved", "release", "handler_error", "reserved", "complete", "new"}, ev.list())
}

func TestPanicReleasesKeyAndPanicsOn(t *testing.T) {
	store := memory.New()
	c := counter{fail: func(run int) error {
		if run == 1 {
			panic("boom")
		}
		return nil
	}}
	charge := mustWrap(t, c.handle, store)
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_, _ = charge(t.Context(), o1)
		t.Fatal("the panic must go on")
	}()
	assert.Equal(t, 0, store.Len(), "the key must be released")
	_, err := charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 2, c.count())
}

func TestPermanentErrorsAreRecordedAndReplayed(t *testing.T) {
	declined := &declinedError{Reason: "stolen card"}
	for name, tc := range map[string]struct {
		fail func(int) error
		opts []idempotency.WrapOption
	}{
		"Permanent": {fail: func(int) error { return idempotency.Permanent(declined) }},
		"WithPermanentErrors": {
			fail: func(int) error { return declined },
			opts: []idempotency.WrapOption{idempotency.WithPermanentErrors(func(err error) bool {
				var d *declinedError
				return errors.As(err, &d)
			})},
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := memory.New()
			c := counter{fail: tc.fail}
			charge := mustWrap(t, c.handle, store, tc.opts...)

			_, err := charge(t.Context(), o1)
			require.Same(t, declined, err, "the first caller gets the handler's own error")

			_, err = charge(t.Context(), o1)
			var stored *idempotency.RecordedError
			require.ErrorAs(t, err, &stored)
			assert.Equal(t, "declinedError", stored.Type)
			assert.Equal(t, declined.Error(), stored.Message)
			assert.Equal(t, declined.Error(), err.Error())
			assert.Equal(t, 1, c.count(), "a recorded error must not run the handler again")
		})
	}

	t.Run("WithErrorDecoder", func(t *testing.T) {
		c := counter{fail: func(int) error { return idempotency.Permanent(declined) }}
		charge := mustWrap(t, c.handle, memory.New(), idempotency.WithErrorDecoder(func(se *idempotency.RecordedError) error {
			return &declinedError{Reason: strings.TrimPrefix(se.Message, "card declined: ")}
		}))
		_, err := charge(t.Context(), o1)
		require.Same(t, declined, err)
		_, err = charge(t.Context(), o1)
		var d *declinedError
		require.ErrorAs(t, err, &d)
		assert.Equal(t, "stolen card", d.Reason)
	})
}

func TestInProgressElsewhere(t *testing.T) {
	store := memory.New()
	var c counter
	started, release := make(chan struct{}), make(chan struct{})
	blocking := func(ctx context.Context, o order) (receipt, error) {
		close(started)
		<-release
		return c.handle(ctx, o)
	}
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	first := mustWrap(t, blocking, store, idempotency.WithKeyPrefix("p"))
	second := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))

	done := make(chan error)
	go func() {
		_, err := first(ctx, o1)
		done <- err
	}()
	<-started
	_, err := second(t.Context(), o1)
	var inProgress *idempotency.InProgressError
	require.ErrorAs(t, err, &inProgress)
	assert.ErrorIs(t, err, idempotency.ErrInProgress)
	assert.True(t, inProgress.Until.Equal(deadline), "Until %v is the first invocation's deadline %v", inProgress.Until, deadline)
	assert.True(t, strings.HasPrefix(inProgress.Key, "p#"), inProgress.Key)
	assert.Contains(t, err.Error(), "idempotency: key p#")

	close(release)
	require.NoError(t, <-done)
	_, err = second(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 1, c.count())
}

// writeCounter counts the reservations written to a memory store, and
// reads it in the process as the memory store does.
type writeCounter struct {
	*memory.Store
	puts atomic.Int32
}

func (s *writeCounter) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	s.puts.Add(1)
	return s.Store.Put(ctx, rec, now)
}

// TestLocalStoreReplaysWithoutWrites: a store that can be read in the
// process answers a completed key before the reservation write, and leaves
// payload mismatches to the write.
func TestLocalStoreReplaysWithoutWrites(t *testing.T) {
	store := &writeCounter{Store: memory.New()}
	var c counter
	var ev eventLog
	charge := mustWrap(t, c.handle, store, idempotency.WithKey("order_id"),
		idempotency.WithPayloadValidation("amount"), idempotency.WithObserver(&ev))

	callAndRetry(t, charge, o1, 3)
	assert.Equal(t, int32(1), store.puts.Load(), "replays write nothing")

	_, err := charge(t.Context(), order{OrderID: o1.OrderID, Amount: 999})
	assert.ErrorIs(t, err, idempotency.ErrPayloadMismatch)
	assert.Equal(t, int32(2), store.puts.Load(), "a mismatch is decided by the write")
	assert.Equal(t, 1, c.count())
	assert.Equal(t, []string{"reserved", "complete", "new", "replay", "replay", "replay", "payload_mismatch"}, ev.list())
}

func TestPayloadValidation(t *testing.T) {
	store := memory.New()
	var c counter
	charge := mustWrap(t, c.handle, store,
		idempotency.WithKey("order_id"), idempotency.WithPayloadValidation("[customer, amount]"))

	first, err := charge(t.Context(), o1)
	require.NoError(t, err)

	// A field outside the validated payload may change.
	same, err := charge(t.Context(), order{OrderID: "o-1", Customer: "c-1", Amount: 100})
	require.NoError(t, err)
	assert.Equal(t, first, same)

	_, err = charge(t.Context(), order{OrderID: "o-1", Customer: "c-1", Amount: 999})
	var mismatch *idempotency.PayloadMismatchError
	require.ErrorAs(t, err, &mismatch)
	assert.ErrorIs(t, err, idempotency.ErrPayloadMismatch)
	assert.Equal(t, 1, c.count())

	// Without validation, the key alone decides.
	store2 := memory.New()
	var c2 counter
	loose := mustWrap(t, c2.handle, store2, idempotency.WithKey("order_id"))
	_, err = loose(t.Context(), o1)
	require.NoError(t, err)
	got, err := loose(t.Context(), order{OrderID: "o-1", Amount: 999})
	require.NoError(t, err)
	assert.Equal(t, 100, got.Amount)
}

func TestStoreFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   func(faultstore.Op, string, int) faultstore.Fault
		op      string
		leftovr bool
	}{
		{name: "put fails", fault: faultstore.On(faultstore.OpPut, 1, faultstore.FailBefore), op: "put"},
		{name: "put reply lost", fault: faultstore.On(faultstore.OpPut, 1, faultstore.LoseReply), op: "put"},
		{name: "get fails after a conflict", op: "get", fault: func(op faultstore.Op, _ string, n int) faultstore.Fault {
			switch {
			case op == faultstore.OpPut && n == 2:
				return faultstore.DropExisting
			case op == faultstore.OpGet:
				return faultstore.FailBefore
			}
			return faultstore.None
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := memory.New()
			store := faultstore.New(inner)
			var c counter
			charge := mustWrap(t, c.handle, store)
			if tc.op == "get" {
				_, err := charge(t.Context(), o1) // completes the key
				require.NoError(t, err)
			}
			before := c.count()
			store.Fault = tc.fault

			_, err := charge(t.Context(), o1)
			var se *idempotency.StoreError
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, idempotency.ErrStore)
			assert.ErrorIs(t, err, faultstore.ErrInjected)
			assert.Equal(t, tc.op, se.Op)
			assert.Equal(t, before, c.count(), "the handler must not run")

			// Nothing is left locked: once the fault is gone, the key works.
			store.Fault = nil
			_, err = charge(t.Context(), o1)
			require.NoError(t, err)
		})
	}
}

// A reservation whose reply is lost and whose retried write conflicts
// with itself, on a store that does not return the conflicting record,
// then fails to read it back: the call fails with *StoreError, and the
// record it wrote must not lock the key.
func TestStoreErrorAfterOwnConflictReleasesTheKey(t *testing.T) {
	// The inner fault store answers the retried write's conflict without
	// the existing record; the outer one loses the first reply, retries,
	// and fails the read that follows.
	withoutExisting := faultstore.New(memory.New())
	withoutExisting.Fault = faultstore.On(faultstore.OpPut, 2, faultstore.DropExisting)
	store := faultstore.New(withoutExisting)
	store.Fault = func(op faultstore.Op, _ string, n int) faultstore.Fault {
		switch {
		case op == faultstore.OpPut && n == 1:
			return faultstore.RetryAfterLostReply
		case op == faultstore.OpGet:
			return faultstore.FailBefore
		}
		return faultstore.None
	}
	var c counter
	charge := mustWrap(t, c.handle, store)
	_, err := charge(t.Context(), o1)
	var se *idempotency.StoreError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "get", se.Op)
	assert.Zero(t, c.count(), "the handler must not run")
	assert.Equal(t, 1, store.Calls(faultstore.OpDelete), "the reservation is released, fenced on its token")

	store.Fault = nil
	_, err = charge(t.Context(), o1)
	require.NoError(t, err, "a retry runs at once: nothing is locked")
	assert.Equal(t, 1, c.count())
}

func TestLostPutReplyRecognisesOwnReservation(t *testing.T) {
	store := faultstore.New(memory.New())
	store.Fault = faultstore.On(faultstore.OpPut, 1, faultstore.RetryAfterLostReply)
	var c counter
	var ev eventLog
	charge := mustWrap(t, c.handle, store, idempotency.WithObserver(&ev))
	_, err := charge(t.Context(), o1)
	require.NoError(t, err, "the retried write must recognise its own reservation")
	assert.Equal(t, 1, c.count())
	assert.Equal(t, []string{"reserved", "complete", "new"}, ev.list())

	_, err = charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 1, c.count())
}

func TestLostUpdateReplyIsHarmless(t *testing.T) {
	store := faultstore.New(memory.New())
	store.Fault = faultstore.On(faultstore.OpUpdate, 1, faultstore.RetryAfterLostReply)
	var c counter
	charge := mustWrap(t, c.handle, store)
	first, err := charge(t.Context(), o1)
	require.NoError(t, err)
	again, err := charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, 1, c.count())
}

func TestCompletionFailureReturnsResultAndKeepsReservation(t *testing.T) {
	synctest.Test(t, testCompletionFailureReturnsResultAndKeepsReservation)
}

func testCompletionFailureReturnsResultAndKeepsReservation(t *testing.T) {
	store := faultstore.New(memory.New())
	store.Fault = faultstore.On(faultstore.OpUpdate, 1, faultstore.FailBefore)
	var c counter
	var ev eventLog
	logger, logs := testlog.Text()
	charge := mustWrap(t, c.handle, store, idempotency.WithObserver(&ev),
		idempotency.WithLogger(logger), idempotency.WithLease(time.Minute))

	got, err := charge(t.Context(), o1)
	require.NoError(t, err, "the caller must get the result even though storing it failed")
	assert.Equal(t, "ch_o-1_1", got.ChargeID)
	assert.Equal(t, []string{"reserved", "complete failed", "completion_failed"}, ev.list())
	assert.ErrorIs(t, ev.errOf("complete failed"), faultstore.ErrInjected)
	assert.Contains(t, logs.String(), "level=ERROR")
	assert.Contains(t, logs.String(), "storing the result failed")

	// The key stays reserved until its in-progress expiry...
	_, err = charge(t.Context(), o1)
	assert.ErrorIs(t, err, idempotency.ErrInProgress)
	// ...and then runs again.
	time.Sleep(time.Minute + time.Millisecond)
	_, err = charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 2, c.count())
}

func TestReleaseFailureKeepsReservationUntilInProgressExpiry(t *testing.T) {
	synctest.Test(t, testReleaseFailureKeepsReservationUntilInProgressExpiry)
}

func testReleaseFailureKeepsReservationUntilInProgressExpiry(t *testing.T) {
	store := faultstore.New(memory.New())
	store.Fault = faultstore.On(faultstore.OpDelete, 1, faultstore.FailBefore)
	boom := errors.New("boom")
	c := counter{fail: func(run int) error {
		if run == 1 {
			return boom
		}
		return nil
	}}
	var ev eventLog
	charge := mustWrap(t, c.handle, store,
		idempotency.WithObserver(&ev), idempotency.WithLease(30*time.Second))

	_, err := charge(t.Context(), o1)
	require.Same(t, boom, err)
	assert.Equal(t, "release failed", ev.list()[1])
	_, err = charge(t.Context(), o1)
	assert.ErrorIs(t, err, idempotency.ErrInProgress)
	time.Sleep(31 * time.Second)
	_, err = charge(t.Context(), o1)
	require.NoError(t, err)
}

func TestRecordExpiresBetweenWriteAndRead(t *testing.T) {
	inner := memory.New()
	store := faultstore.New(inner)
	var c counter
	charge := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))
	_, err := charge(t.Context(), o1)
	require.NoError(t, err)

	// The next reservation conflicts, without the existing record; before
	// the read, the record goes away.
	store.Fault = faultstore.On(faultstore.OpPut, 2, faultstore.DropExisting)
	store.Before = func(op faultstore.Op, key string, n int) {
		if op == faultstore.OpGet {
			rec, err := inner.Get(context.Background(), key)
			require.NoError(t, err)
			require.NoError(t, inner.DeleteRecord(context.Background(), rec))
		}
	}
	_, err = charge(t.Context(), o1)
	require.NoError(t, err, "the reservation must be retried")
	assert.Equal(t, 2, c.count())
	assert.Equal(t, 3, store.Calls(faultstore.OpPut))
}

func TestRecordThatKeepsChangingGivesUp(t *testing.T) {
	inner := memory.New()
	var c counter
	_, err := mustWrap(t, c.handle, inner, idempotency.WithKeyPrefix("p"))(t.Context(), o1)
	require.NoError(t, err)

	// Every write conflicts, and every read finds nothing, as if the record
	// were deleted and written again each time.
	store := faultstore.New(persistenceNotFound{inner})
	store.Fault = faultstore.On(faultstore.OpPut, 0, faultstore.DropExisting)
	_, err = mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))(t.Context(), o1)
	var se *idempotency.StoreError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "kept changing")
	assert.Equal(t, 3, store.Calls(faultstore.OpPut))
	assert.Equal(t, 1, c.count())
}

// persistenceNotFound is a store whose Get never finds anything.
type persistenceNotFound struct{ persistence.Store }

func (persistenceNotFound) Get(context.Context, string) (*persistence.Record, error) {
	return nil, persistence.ErrNotFound
}

func TestFinalWritesSurviveCancellation(t *testing.T) {
	store := memory.New()
	var c counter
	ctx, cancel := context.WithCancel(t.Context())
	charge := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
		cancel() // the caller gives up while the handler finishes
		return c.handle(ctx, o)
	}, store)
	_, err := charge(ctx, o1)
	require.NoError(t, err)
	_, err = charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 1, c.count(), "the completion must have been written despite the cancellation")
}

func TestResponseTooLarge(t *testing.T) {
	store := memory.New(func(o *memory.Options) { o.MaxResponseSize = 10 })
	var c counter
	var ev eventLog
	charge := mustWrap(t, c.handle, store, idempotency.WithObserver(&ev))
	got, err := charge(t.Context(), o1)
	require.NoError(t, err, "the first caller gets the result")
	assert.Equal(t, "ch_o-1_1", got.ChargeID)
	assert.Contains(t, ev.list(), "complete omitted")

	_, err = charge(t.Context(), o1)
	var tooLarge *idempotency.ResponseTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.ErrorAs(t, err, new(*idempotency.ResponseTooLargeError))
	assert.Equal(t, 1, c.count(), "the side effect must not run again")
}

func TestStoredResponseThatDoesNotDecode(t *testing.T) {
	store := memory.New()
	var c counter
	charge := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))
	asString := mustWrap(t, func(context.Context, order) (string, error) { return "x", nil }, store, idempotency.WithKeyPrefix("p"))
	_, err := asString(t.Context(), o1)
	require.NoError(t, err)
	_, err = charge(t.Context(), o1)
	var re *idempotency.ReplayError
	require.ErrorAs(t, err, &re)
	assert.ErrorAs(t, err, new(*idempotency.ReplayError))
	assert.Equal(t, 0, c.count())
}

type unencodable struct {
	C chan int `json:"c"`
}

func TestUnencodableResultIsRecorded(t *testing.T) {
	store := memory.New()
	runs := 0
	h := mustWrap(t, func(context.Context, order) (unencodable, error) {
		runs++
		return unencodable{C: make(chan int)}, nil
	}, store)
	_, err := h(t.Context(), o1)
	var ee *idempotency.ResponseEncodingError
	require.ErrorAs(t, err, &ee)
	_, err = h(t.Context(), o1)
	var stored *idempotency.RecordedError
	require.ErrorAs(t, err, &stored)
	assert.Equal(t, "ResponseEncodingError", stored.Type)
	assert.Equal(t, 1, runs)
}

func TestLateFinisherIsFencedOut(t *testing.T) {
	synctest.Test(t, testLateFinisherIsFencedOut)
}

func testLateFinisherIsFencedOut(t *testing.T) {
	store := memory.New()
	var ev eventLog
	started, finish := make(chan struct{}), make(chan struct{})
	slow := mustWrap(t, func(context.Context, order) (receipt, error) {
		close(started)
		<-finish
		return receipt{ChargeID: "slow"}, nil
	}, store, idempotency.WithKeyPrefix("p"), idempotency.WithObserver(&ev))
	fast := mustWrap(t, func(context.Context, order) (receipt, error) {
		return receipt{ChargeID: "fast"}, nil
	}, store, idempotency.WithKeyPrefix("p"))

	// The slow invocation's deadline is in 10 seconds; it runs past it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan receipt)
	go func() {
		got, err := slow(ctx, o1)
		assert.NoError(t, err)
		done <- got
	}()
	<-started
	time.Sleep(11 * time.Second) // past the slow invocation's in-progress expiry
	got, err := fast(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, "fast", got.ChargeID, "the key is taken over after the in-progress expiry")

	close(finish)
	assert.Equal(t, "slow", (<-done).ChargeID)
	assert.Contains(t, ev.list(), "complete fenced")

	replay, err := fast(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, "fast", replay.ChargeID, "the late finisher must not overwrite the record")
}

func TestResponseHookMarksReplays(t *testing.T) {
	var c counter
	charge := mustWrap(t, c.handle, memory.New(), idempotency.WithResponseHook(
		func(_ context.Context, r receipt, rec *persistence.Record) receipt {
			r.ChargeID += " (replayed " + string(rec.Status) + ")"
			return r
		}))
	first, err := charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, "ch_o-1_1", first.ChargeID)
	again, err := charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, "ch_o-1_1 (replayed COMPLETED)", again.ChargeID)
}

func TestKeyFromContext(t *testing.T) {
	var seen string
	h := mustWrap(t, func(ctx context.Context, o order) (string, error) {
		key, ok := idempotency.KeyFromContext(ctx)
		require.True(t, ok)
		seen = key
		return key, nil
	}, memory.New(), idempotency.WithKeyPrefix("orders"), idempotency.WithKey("order_id"))
	got, err := h(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, seen, got)
	// sha256 of the canonical JSON "o-1".
	assert.Equal(t, "orders#00d5c8b71f851bbe47626a189b20fb19c11753e244bb658095c370ba3798f85c", seen)
	_, ok := idempotency.KeyFromContext(t.Context())
	assert.False(t, ok)
}
