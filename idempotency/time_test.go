package idempotency_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// Time inside a synctest bubble is fake: time.Sleep advances it at once
// when every goroutine of the bubble is blocked.

func TestCompletedKeyExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c counter
		charge := mustWrap(t, c.handle, memory.New(), idempotency.WithExpiry(time.Hour))
		_, err := charge(t.Context(), o1)
		require.NoError(t, err)

		time.Sleep(time.Hour - time.Second)
		_, err = charge(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 1, c.count(), "replayed within the expiry")

		time.Sleep(2 * time.Second)
		_, err = charge(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 2, c.count(), "after the expiry the handler runs again")
	})
}

func TestCrashedInvocationFreesKeyAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var c counter
		hang := make(chan struct{})
		crashing := mustWrap(t, func(context.Context, order) (receipt, error) {
			<-hang // never returns while the test runs: a crashed or frozen invocation
			return receipt{}, nil
		}, store, idempotency.WithKeyPrefix("p"), idempotency.WithExpiry(24*time.Hour))
		retry := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithExpiry(24*time.Hour))

		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // the Lambda deadline
		defer cancel()
		go func() { _, _ = crashing(ctx, o1) }()
		synctest.Wait()

		time.Sleep(10 * time.Second)
		_, err := retry(t.Context(), o1)
		var inProgress *idempotency.InProgressError
		require.ErrorAs(t, err, &inProgress)
		assert.Equal(t, start.Add(30*time.Second), inProgress.Until)

		time.Sleep(21 * time.Second) // just past the deadline, long before the expiry
		got, err := retry(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, "ch_o-1_1", got.ChargeID)
		close(hang)
	})
}

// Without a deadline, a reservation is a lease that the call renews while
// its function runs: a call that runs for three leases keeps its key.
func TestLeaseIsRenewedWhileTheFunctionRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := faultstore.New(memory.New())
		var ev eventLog
		long := mustWrap(t, func(context.Context, order) (receipt, error) {
			time.Sleep(3 * defaultLease)
			return receipt{ChargeID: "long"}, nil
		}, store, idempotency.WithKeyPrefix("p"), idempotency.WithObserver(&ev))
		var c counter
		other := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))
		var wg sync.WaitGroup
		wg.Go(func() {
			got, err := long(context.Background(), o1)
			assert.NoError(t, err)
			assert.Equal(t, "long", got.ChargeID)
		})
		for range 5 {
			time.Sleep(defaultLease / 2)
			// Another process: it asks the store, which the lease keeps
			// holding the key.
			rec, err := store.Inner.Get(t.Context(), keyOf(t, "p", o1))
			require.NoError(t, err)
			assert.True(t, rec.Live(time.Now()), "the reservation lapsed while its function ran")
		}
		wg.Wait()
		assert.Equal(t, 0, c.count())
		assert.GreaterOrEqual(t, store.Calls(faultstore.OpUpdate), 1+3*3-1, "a renewal every third of a lease, then the completion")
		_, err := other(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 0, c.count(), "the retry replays the long call's result")
	})
}

// A process that dies stops renewing: its key lapses within one lease.
func TestLeaseLapsesWhenRenewalsStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := faultstore.New(memory.New())
		// The renewals never reach the store, as from a process that died.
		store.Fault = faultstore.On(faultstore.OpUpdate, 0, faultstore.FailBefore)
		var ev eventLog
		hang := make(chan struct{})
		crashing := mustWrap(t, func(context.Context, order) (receipt, error) { <-hang; return receipt{}, nil },
			store, idempotency.WithKeyPrefix("p"), idempotency.WithObserver(&ev), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
		var c counter
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = crashing(context.Background(), o1) })
		synctest.Wait()
		other := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))

		time.Sleep(defaultLease - time.Second)
		_, err := other(t.Context(), o1)
		assert.ErrorIs(t, err, idempotency.ErrInProgress)
		assert.Contains(t, ev.list(), "renewal failed")
		time.Sleep(2 * time.Second)
		store.Fault = nil
		_, err = other(t.Context(), o1)
		require.NoError(t, err, "the key lapsed one lease after the reservation")
		assert.Equal(t, 1, c.count())
		close(hang)
		wg.Wait()
	})
}

func TestShortExpiryDoesNotCutAReservationShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		hang := make(chan struct{})
		slow := mustWrap(t, func(context.Context, order) (receipt, error) { <-hang; return receipt{}, nil },
			store, idempotency.WithKeyPrefix("p"), idempotency.WithExpiry(time.Second))
		var c counter
		other := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithExpiry(time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		go func() { _, _ = slow(ctx, o1) }()
		synctest.Wait()

		time.Sleep(30 * time.Second) // past the expiry, within the deadline
		_, err := other(t.Context(), o1)
		assert.ErrorIs(t, err, idempotency.ErrInProgress)
		assert.Equal(t, 0, c.count())
		close(hang)
	})
}

// An invocation that runs past its deadline, while nobody retries its key,
// completes it late: however much traffic other keys bring meanwhile, the
// store keeps its record until the record's expiry, and the client's retry
// gets the late result instead of a second run.
func TestLateCompletionWithoutTakeoverIsReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var c counter
		overrun := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
			time.Sleep(time.Minute) // the side effect finishes well past the deadline
			return c.handle(ctx, o)
		}, store, idempotency.WithKeyPrefix("p"))
		retry := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))
		other := mustWrap(t, func(context.Context, order) (receipt, error) { return receipt{}, nil }, store)

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := overrun(ctx, o1)
			assert.NoError(t, err)
		}()
		time.Sleep(30 * time.Second) // past the deadline; the handler still runs
		for i := range 2000 {
			_, err := other(t.Context(), order{OrderID: "other-" + strconv.Itoa(i)})
			require.NoError(t, err)
		}
		<-done
		got, err := retry(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 1, c.count(), "the retry gets the late result")
		assert.Equal(t, "ch_"+o1.OrderID+"_1", got.ChargeID)
	})
}

// defaultLease is the lease of a call without a deadline or WithLease.
const defaultLease = 30 * time.Second
