package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// endsWithoutOutcome is a store whose completions never arrive: the call
// that reserved a key ends as if its process died before it could record
// its result, and its reservation lapses.
func endsWithoutOutcome(inner persistence.Store) *heldStore {
	return &heldStore{Store: inner, hold: func(rec *persistence.Record) bool {
		return rec.Status == persistence.StatusCompleted
	}}
}

// A key whose call ended without an outcome stays held with
// WithHoldUntilReleased: a retry after its reservation lapsed is refused
// with *HeldError, at once even with WithWait, and runs only after an
// operator released the key. Without the option, the same retry takes the
// key over and runs the function again.
func TestHeldKeyWaitsForTheOperator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memory.New()
		var c counter
		events := &eventLog{}
		opts := []idempotency.WrapOption{idempotency.WithKeyPrefix("p"), idempotency.WithLease(time.Second),
			idempotency.WithHoldUntilReleased(), idempotency.WithLogger(discardLogger()), idempotency.WithObserver(events)}
		charge := mustWrap(t, c.handle, endsWithoutOutcome(inner), opts...)

		_, _ = charge(t.Context(), o1) // its completion is lost
		require.Equal(t, 1, c.count())
		rec, err := inner.Get(t.Context(), keyOf(t, "p", o1))
		require.NoError(t, err)
		require.True(t, rec.Held, "the reservation is held")

		// While the reservation is live, a retry is told the key is in
		// progress, as without the option.
		_, err = charge(t.Context(), o1)
		require.ErrorIs(t, err, idempotency.ErrInProgress)

		time.Sleep(2 * time.Second) // past the reservation's in-progress expiry
		retry := mustWrap(t, c.handle, inner, append(opts, idempotency.WithWait(time.Minute))...)
		start := time.Now()
		_, err = retry(t.Context(), o1)
		var held *idempotency.HeldError
		require.ErrorAs(t, err, &held)
		assert.ErrorIs(t, err, idempotency.ErrHeld)
		assert.Equal(t, keyOf(t, "p", o1), held.Key)
		assert.True(t, held.Since.Equal(rec.InProgressExpiresAt), "held since the reservation lapsed: %v, want %v", held.Since, rec.InProgressExpiresAt)
		assert.Zero(t, time.Since(start), "no wait ends a hold: the call is refused at once")
		assert.Equal(t, 1, c.count(), "the function did not run again")
		ended := events.events()[len(events.events())-1]
		assert.Equal(t, idempotency.EventCallEnded, ended.Kind)
		assert.Equal(t, idempotency.OutcomeHeld, ended.Outcome)

		// The operator checks the side effect and releases the key.
		admin, ok := persistence.Store(inner).(persistence.Admin)
		require.True(t, ok)
		rec, err = inner.Get(t.Context(), keyOf(t, "p", o1))
		require.NoError(t, err)
		require.NoError(t, admin.DeleteRecord(t.Context(), rec))
		_, err = retry(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 2, c.count(), "after the release, the retry runs")
	})
}

// Without WithHoldUntilReleased, a lapsed reservation is taken over: the
// behaviour the option turns off.
func TestLapsedKeyIsTakenOverWithoutHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memory.New()
		var c counter
		opts := []idempotency.WrapOption{idempotency.WithKeyPrefix("p"), idempotency.WithLease(time.Second), idempotency.WithLogger(discardLogger())}
		_, _ = mustWrap(t, c.handle, endsWithoutOutcome(inner), opts...)(t.Context(), o1)
		time.Sleep(2 * time.Second)
		_, err := mustWrap(t, c.handle, inner, opts...)(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 2, c.count())
	})
}

// A held call that ends with an outcome after all is not held: its
// function's error releases the key as usual, and its result, stored late
// (past its in-progress expiry), completes the key.
func TestHoldKeepsOnlyCallsWithoutAnOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memory.New()
		c := counter{fail: func(run int) error {
			switch run {
			case 1:
				return errors.New("card network unavailable")
			case 2:
				time.Sleep(3 * time.Second) // past its lease: no renewal makes it out
			}
			return nil
		}}
		charge := mustWrap(t, c.handle, &heldStore{Store: inner, hold: func(rec *persistence.Record) bool {
			return rec.Status == persistence.StatusInProgress // the renewals
		}}, idempotency.WithKeyPrefix("p"), idempotency.WithLease(time.Second),
			idempotency.WithHoldUntilReleased(), idempotency.WithLogger(discardLogger()))

		_, err := charge(t.Context(), o1)
		require.Error(t, err)
		_, err = charge(t.Context(), o1)
		require.NoError(t, err, "the function's error released the key")
		rec, err := inner.Get(t.Context(), keyOf(t, "p", o1))
		require.NoError(t, err)
		assert.Equal(t, persistence.StatusCompleted, rec.Status, "the late result completes its own held reservation")
		assert.False(t, rec.Held)
		_, err = charge(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 2, c.count(), "the third call is a replay")
	})
}

// gatedPuts holds each reservation at gate until the test opens it, and
// counts them.
type gatedPuts struct {
	persistence.Store
	gate chan struct{}
	puts atomic.Int32
}

func (s *gatedPuts) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	s.puts.Add(1)
	<-s.gate
	return s.Store.Put(ctx, rec, now)
}

// Calls that share a process with the one that finds a key held are
// refused as it is, without a store request of their own.
func TestHeldKeyRefusesFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memory.New()
		var c counter
		opts := []idempotency.WrapOption{idempotency.WithKeyPrefix("p"), idempotency.WithLease(time.Second),
			idempotency.WithHoldUntilReleased(), idempotency.WithLogger(discardLogger())}
		_, _ = mustWrap(t, c.handle, endsWithoutOutcome(inner), opts...)(t.Context(), o1)
		time.Sleep(2 * time.Second)

		store := &gatedPuts{Store: inner, gate: make(chan struct{})}
		charge := mustWrap(t, c.handle, store, opts...)
		errs := make(chan error, 8)
		call := func() {
			_, err := charge(context.Background(), o1)
			errs <- err
		}
		go call()
		synctest.Wait() // the leader waits at the gate with its reservation
		for range cap(errs) - 1 {
			go call()
		}
		synctest.Wait() // the others follow it
		close(store.gate)
		for range cap(errs) {
			assert.ErrorIs(t, <-errs, idempotency.ErrHeld)
		}
		assert.EqualValues(t, 1, store.puts.Load(), "one reservation, the leader's")
		assert.Equal(t, 1, c.count())
	})
}
