package idempotency_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// heldStore holds the writes that hold selects: their sender gets an
// error, as from a timeout, and the write waits in the network until the
// test applies it, late.
type heldStore struct {
	persistence.Store
	hold func(rec *persistence.Record) bool

	mu   sync.Mutex
	held []func() error
}

func (s *heldStore) Update(ctx context.Context, rec *persistence.Record) error {
	if s.hold != nil && s.hold(rec) {
		late := *rec
		s.mu.Lock()
		s.held = append(s.held, func() error { return s.Store.Update(context.Background(), &late) })
		s.mu.Unlock()
		return context.DeadlineExceeded
	}
	return s.Store.Update(ctx, rec)
}

// applyHeld applies the held writes, and returns their errors.
func (s *heldStore) applyHeld() []error {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	var errs []error
	for _, apply := range held {
		errs = append(errs, apply())
	}
	return errs
}

// A lease renewal held in the network until after the call completed, and
// applied then, must not make the completed record in progress again:
// when that renewal's in-progress expiry passed, a retry would take the
// key over and run the function a second time.
func TestLateRenewalDoesNotReopenACompletedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memory.New()
		store := &heldStore{Store: inner, hold: func(rec *persistence.Record) bool {
			return rec.Status == persistence.StatusInProgress // the renewals
		}}
		c := counter{fail: func(run int) error {
			if run == 1 {
				time.Sleep(700 * time.Millisecond) // past the first renewal, at 300 ms
			}
			return nil
		}}
		charge := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"),
			idempotency.WithLease(900*time.Millisecond), idempotency.WithLogger(discardLogger()))

		first, err := charge(t.Context(), o1)
		require.NoError(t, err)
		errs := store.applyHeld()
		require.Len(t, errs, 1, "one renewal was sent and held")
		assert.ErrorIs(t, errs[0], persistence.ErrFenced, "a renewal applied after the completion is refused")
		rec, err := inner.Get(t.Context(), keyOf(t, "p", o1))
		require.NoError(t, err)
		assert.Equal(t, persistence.StatusCompleted, rec.Status)

		time.Sleep(2 * time.Second) // past the held renewal's lease
		again, err := charge(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, first, again)
		assert.Equal(t, 1, c.count(), "the function ran again")
	})
}

// slowPutStore answers reservations after delay: their replies come late.
type slowPutStore struct {
	persistence.Store
	delay time.Duration
}

func (s slowPutStore) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	err := s.Store.Put(ctx, rec, now)
	time.Sleep(s.delay)
	return err
}

// A reservation whose reply comes after its lease has ended does not run
// the function: by then another call may have taken the key over.
func TestReservationThatLapsedBeforeItsReplyDoesNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memory.New()
		var c counter
		charge := mustWrap(t, c.handle, slowPutStore{inner, 2 * time.Second}, idempotency.WithKeyPrefix("p"),
			idempotency.WithLease(time.Second), idempotency.WithLogger(discardLogger()))
		_, err := charge(t.Context(), o1)
		var storeErr *idempotency.StoreError
		require.ErrorAs(t, err, &storeErr)
		assert.Zero(t, c.count(), "the function ran on a lapsed reservation")
		_, err = inner.Get(t.Context(), keyOf(t, "p", o1))
		require.ErrorIs(t, err, persistence.ErrNotFound, "the lapsed reservation is released")
	})
}
