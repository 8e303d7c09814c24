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
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// remoteStore is a store read over the network, as DynamoDB and Redis
// are: no record is read in the process (it hides memory.Store's
// LocalReader), and each request takes latency.
type remoteStore struct {
	inner   persistence.Store
	latency time.Duration
}

func (s remoteStore) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	time.Sleep(s.latency)
	return s.inner.Put(ctx, rec, now)
}

func (s remoteStore) Get(ctx context.Context, key string) (*persistence.Record, error) {
	time.Sleep(s.latency)
	return s.inner.Get(ctx, key)
}

func (s remoteStore) Update(ctx context.Context, rec *persistence.Record) error {
	time.Sleep(s.latency)
	return s.inner.Update(ctx, rec)
}

func (s remoteStore) Delete(ctx context.Context, key, token string) error {
	time.Sleep(s.latency)
	return s.inner.Delete(ctx, key, token)
}

// concurrently calls charge n times at once with in, and returns the
// results and errors.
func concurrently(ctx context.Context, n int, charge func(context.Context, order) (receipt, error), in order) ([]receipt, []error) {
	outs, errs := make([]receipt, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i], errs[i] = charge(ctx, in) })
	}
	wg.Wait()
	return outs, errs
}

// Duplicates of a completed key that arrive together in one process get
// the stored result: the first reads it from the store, and the others
// wait for that answer instead of being refused as in progress, which
// nothing is.
func TestConcurrentReplaysOfACompletedKey(t *testing.T) {
	for _, n := range []int{10, 200} {
		synctest.Test(t, func(t *testing.T) {
			counted := faultstore.New(remoteStore{memory.New(), 5 * time.Millisecond})
			var c counter
			charge := mustWrap(t, c.handle, counted, idempotency.WithKeyPrefix("p"))
			first, err := charge(t.Context(), o1)
			require.NoError(t, err)
			puts := counted.Calls(faultstore.OpPut)

			outs, errs := concurrently(t.Context(), n, charge, o1)
			for i := range n {
				require.NoError(t, errs[i], "call %d of %d", i, n)
				assert.Equal(t, first, outs[i])
			}
			assert.Equal(t, 1, c.count())
			assert.Equal(t, 1, counted.Calls(faultstore.OpPut)-puts, "the duplicates share one store request")
		})
	}
}

// Duplicates of a key whose first call is running get *InProgressError
// without a store request of their own, once that call has reserved it.
func TestConcurrentDuplicatesOfARunningKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		counted := faultstore.New(remoteStore{memory.New(), 5 * time.Millisecond})
		running := make(chan struct{})
		c := counter{fail: func(int) error { close(running); time.Sleep(time.Second); return nil }}
		charge := mustWrap(t, c.handle, counted, idempotency.WithKeyPrefix("p"))
		first := make(chan struct{})
		go func() { defer close(first); _, _ = charge(context.Background(), o1) }()
		<-running
		_, errs := concurrently(t.Context(), 20, charge, o1)
		for _, err := range errs {
			var ipe *idempotency.InProgressError
			require.ErrorAs(t, err, &ipe)
			assert.False(t, ipe.Until.IsZero(), "the reservation's lapse is known")
		}
		assert.Equal(t, 1, counted.Calls(faultstore.OpPut))
		<-first
	})
}

// A waiter that follows a holder running past its deadline wakes when the
// holder's reservation lapses, and gets the key's result (here, by taking
// the key over itself), not *InProgressError at the end of its wait.
func TestWaiterWakesWhenTheHolderLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := remoteStore{memory.New(), time.Millisecond}
		c := counter{fail: func(run int) error {
			if run == 1 {
				time.Sleep(3 * time.Second) // past its one-second deadline
			}
			return nil
		}}
		opts := []idempotency.WrapOption{idempotency.WithKeyPrefix("p"), idempotency.WithLogger(discardLogger())}
		charge := mustWrap(t, c.handle, store, opts...)
		waiting := mustWrap(t, c.handle, store, append(opts, idempotency.WithWait(10*time.Second))...)

		late := make(chan struct{})
		go func() {
			defer close(late)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, _ = charge(ctx, o1)
		}()
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		got, err := waiting(t.Context(), o1)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 2*time.Second, "it woke at the lapse, not at the end of its wait")
		again, err := charge(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, got, again)
		<-late
		assert.Equal(t, 2, c.count())
	})
}

// The call that takes over a lapsed key leads the key's flight in its
// process: a duplicate that arrives while it runs is answered without a
// store request, and a waiter is woken by its outcome.
func TestTakeoverLeadsTheFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		counted := faultstore.New(remoteStore{memory.New(), time.Millisecond})
		c := counter{fail: func(run int) error {
			switch run {
			case 1:
				time.Sleep(10 * time.Second) // past its one-second deadline
			case 2:
				time.Sleep(time.Second)
			}
			return nil
		}}
		charge := mustWrap(t, c.handle, counted, idempotency.WithKeyPrefix("p"), idempotency.WithLogger(discardLogger()),
			idempotency.WithWait(10*time.Second))
		// A call with a deadline a moment away has no time to wait: it is
		// answered in progress.
		noWait := func() context.Context {
			ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}
		late := make(chan struct{})
		go func() {
			defer close(late)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, _ = charge(ctx, o1)
		}()
		time.Sleep(2 * time.Second) // the first call's reservation has lapsed
		var takeover receipt
		done := make(chan struct{})
		go func() {
			defer close(done)
			var err error
			takeover, err = charge(t.Context(), o1)
			assert.NoError(t, err)
		}()
		time.Sleep(100 * time.Millisecond) // the takeover runs
		puts := counted.Calls(faultstore.OpPut)
		_, err := charge(noWait(), o1)
		require.ErrorIs(t, err, idempotency.ErrInProgress)
		got, err := charge(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, puts, counted.Calls(faultstore.OpPut), "the duplicate and the waiter followed the takeover's flight")
		<-done
		assert.Equal(t, takeover, got)
		<-late
		assert.Equal(t, 2, c.count())
	})
}

// A store whose reservation panics leaves nothing behind in the process:
// the next call with the key goes to the store.
func TestPanickingStoreLeavesNoFlight(t *testing.T) {
	store := faultstore.New(memory.New())
	store.Before = func(op faultstore.Op, _ string, n int) {
		if op == faultstore.OpPut && n == 1 {
			panic("store bug")
		}
	}
	var c counter
	charge := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))
	require.PanicsWithValue(t, "store bug", func() { _, _ = charge(t.Context(), o1) })
	_, err := charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 1, c.count())
}

// Flights are kept per Guard: duplicates of a completed key that arrive
// together at one wrapped function share one store request, and at two
// wrapped functions over one store (with one prefix) one each.
func TestFlightsPerGuard(t *testing.T) {
	replays := func(t *testing.T, a, b persistence.Store) {
		var c counter
		chargeA := mustWrap(t, c.handle, a, idempotency.WithKeyPrefix("p"))
		chargeB := mustWrap(t, c.handle, b, idempotency.WithKeyPrefix("p"))
		first, err := chargeA(t.Context(), o1)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for _, charge := range []func(context.Context, order) (receipt, error){chargeA, chargeB} {
			wg.Go(func() {
				outs, errs := concurrently(t.Context(), 10, charge, o1)
				for i := range outs {
					assert.NoError(t, errs[i])
					assert.Equal(t, first, outs[i])
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 1, c.count())
	}
	synctest.Test(t, func(t *testing.T) {
		store := faultstore.New(remoteStore{memory.New(), 5 * time.Millisecond})
		replays(t, store, store)
		assert.Equal(t, 3, store.Calls(faultstore.OpPut), "the first call's, and one for each function's duplicates")
	})
}
