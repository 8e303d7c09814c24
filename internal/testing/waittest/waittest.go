// Package waittest runs calls that wait for a key (idempotency.WithWait)
// across processes, for the tests of the stores that wake them. A process
// is a Guard of its own over a store of its own, on a client or pool of
// its own.
package waittest

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
)

// PollWatched is the shortest time a watching waiter waits for its next
// poll: 3/4 of 2 seconds.
const PollWatched = 1500 * time.Millisecond

// Hold is how long the holder works after every waiter watches, in
// HoldAndWait's calls that wait for it. Polling with backoff would make
// at least 6 requests in this time; a woken waiter makes 2, or 3 when it
// reads the record.
const Hold = 300 * time.Millisecond

// Watch watches key through store, and stops when the test ends.
func Watch(t *testing.T, store persistence.Notifier, key string) <-chan *persistence.Record {
	t.Helper()
	woken, stop, err := store.Watch(t.Context(), key)
	require.NoError(t, err)
	t.Cleanup(stop)
	return woken
}

// RequireWakeUp receives a wake-up on woken, and checks that it carries
// the record of key that store reads when completed, and none otherwise.
func RequireWakeUp(t *testing.T, woken <-chan *persistence.Record, store persistence.Store, key string, completed bool) {
	t.Helper()
	got := <-woken
	if !completed {
		require.Nil(t, got)
		return
	}
	want, err := store.Get(t.Context(), key)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.True(t, got.ExpiresAt.Equal(want.ExpiresAt) && got.InProgressExpiresAt.Equal(want.InProgressExpiresAt), "expiries")
	got.ExpiresAt, got.InProgressExpiresAt = want.ExpiresAt, want.InProgressExpiresAt
	require.Equal(t, want, got)
}

// A Waiter is a process that waits: a Guard over store.
type Waiter struct {
	// Store is the waiter's store, which counts its calls.
	Store *faultstore.Store
	runs  atomic.Int64
	h     func(context.Context, string) (string, error)
	// watching receives when the waiter has read the record after its
	// watch began: its second reservation attempt has returned.
	watching chan struct{}
	mu       sync.Mutex
	puts     []time.Time // when each reservation attempt began
}

// signalling is a waiter's store: it sends on watching when the second
// Put has returned.
type signalling struct {
	*faultstore.Store
	w *Waiter
}

func (s signalling) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	err := s.Store.Put(ctx, rec, now)
	if s.Calls(faultstore.OpPut) == 2 {
		s.w.watching <- struct{}{}
	}
	return err
}

// NewWaiter returns a waiting process over store.
func NewWaiter(t *testing.T, store persistence.Store) *Waiter {
	w := &Waiter{Store: faultstore.New(store), watching: make(chan struct{}, 1)}
	w.Store.Before = func(op faultstore.Op, _ string, _ int) {
		if op == faultstore.OpPut {
			w.mu.Lock()
			w.puts = append(w.puts, time.Now())
			w.mu.Unlock()
		}
	}
	w.h = wrap(t, signalling{w.Store, w}, func(context.Context, string) (string, error) {
		w.runs.Add(1)
		return "the waiter's", nil
	}, idempotency.WithWait(time.Minute))
	return w
}

// AnsweredAfter returns the time from the waiter's read after its watch
// began to its last reservation attempt, the one that got its answer.
func (w *Waiter) AnsweredAfter(t *testing.T) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	require.GreaterOrEqual(t, len(w.puts), 3)
	return w.puts[len(w.puts)-1].Sub(w.puts[1])
}

// wrap returns fn wrapped over store, its key the whole input.
func wrap(t *testing.T, store persistence.Store, fn func(context.Context, string) (string, error), opts ...idempotency.WrapOption) func(context.Context, string) (string, error) {
	t.Helper()
	h, err := idempotency.Wrap(fn, store, append([]idempotency.WrapOption{idempotency.WithKeyPrefix("waittest")}, opts...)...)
	require.NoError(t, err)
	return h
}

// HoldAndWait runs a holder of a fresh key over holderStore, and the
// waiters, until every waiter watches; then it calls meanwhile, lets the
// holder complete, and checks that every waiter gets its result, and
// nothing runs twice.
func HoldAndWait(t *testing.T, holderStore persistence.Store, waiters []*Waiter, meanwhile func()) {
	t.Helper()
	holdAndWait(t, holderStore, waiters, "the holder's", nil, meanwhile)
}

// HoldLargeAndWait is HoldAndWait with a holder's result of size bytes.
func HoldLargeAndWait(t *testing.T, holderStore persistence.Store, waiters []*Waiter, size int, meanwhile func()) {
	t.Helper()
	holdAndWait(t, holderStore, waiters, strings.Repeat("x", size), nil, meanwhile)
}

// ReleaseAndWait is HoldAndWait with a holder that fails, and so releases
// the key: one waiter takes its turn and runs, and the others get its
// result.
func ReleaseAndWait(t *testing.T, holderStore persistence.Store, waiters []*Waiter) {
	t.Helper()
	holdAndWait(t, holderStore, waiters, "", errors.New("the holder failed"), func() {})
}

// holdAndWait runs HoldAndWait with a holder that returns result and err.
func holdAndWait(t *testing.T, holderStore persistence.Store, waiters []*Waiter, result string, holderErr error, meanwhile func()) {
	t.Helper()
	ctx := t.Context()
	key := rand.Text()
	finish := make(chan struct{})
	entered := make(chan struct{})
	var runs atomic.Int64
	h := wrap(t, holderStore, func(context.Context, string) (string, error) {
		runs.Add(1)
		close(entered)
		<-finish
		return result, holderErr
	})
	var (
		wg   sync.WaitGroup
		want string
		got  = make([]string, len(waiters))
		errs = make([]error, len(waiters))
	)
	wg.Go(func() {
		var err error
		want, err = h(ctx, key)
		assert.Equal(t, holderErr, err)
	})
	<-entered
	for i, w := range waiters {
		wg.Go(func() { got[i], errs[i] = w.h(ctx, key) })
		<-w.watching
	}
	meanwhile()
	close(finish)
	wg.Wait()
	assert.Equal(t, int64(1), runs.Load())
	var waiterRuns int64
	for _, w := range waiters {
		waiterRuns += w.runs.Load()
	}
	if holderErr != nil {
		want = "the waiter's"
		assert.Equal(t, int64(1), waiterRuns, "one waiter takes its turn")
	} else {
		assert.Equal(t, result, want)
		assert.Zero(t, waiterRuns)
	}
	for i := range waiters {
		require.NoError(t, errs[i])
		assert.Equal(t, want, got[i], "the result of the call that ran")
	}
}

// RequireWoken checks that every waiter was answered by the wake-up of
// a holder that worked for Hold: two requests each (the conflict, the
// read after the watch began), the wake-up carrying the answer. A poll
// would be a third. It comes PollWatched after the second request at the
// soonest; the work, the completion and its wake-up take Hold and a few
// milliseconds more, so the check holds at ten times the load.
func RequireWoken(t *testing.T, waiters []*Waiter) {
	t.Helper()
	for _, w := range waiters {
		assert.Equal(t, 2, requests(w), "store requests")
		assert.Equal(t, 1, w.Store.Calls(faultstore.OpWatch))
	}
}

// RequireWokenToRead checks that every waiter was woken, as RequireWoken
// does, by a wake-up without the record: it read it, a third request,
// before any poll could come.
func RequireWokenToRead(t *testing.T, waiters []*Waiter) {
	t.Helper()
	for _, w := range waiters {
		assert.Equal(t, 3, requests(w), "store requests")
		assert.Less(t, w.AnsweredAfter(t), PollWatched, "woken, not polled")
		assert.Equal(t, 1, w.Store.Calls(faultstore.OpWatch))
	}
}

// requests returns the number of w's store requests.
func requests(w *Waiter) int {
	n := 0
	for _, op := range []faultstore.Op{faultstore.OpPut, faultstore.OpGet, faultstore.OpUpdate, faultstore.OpDelete} {
		n += w.Store.Calls(op)
	}
	return n
}

// RequirePolled checks that every waiter was answered by a poll, as when
// its wake-up was lost.
func RequirePolled(t *testing.T, waiters []*Waiter) {
	t.Helper()
	for _, w := range waiters {
		assert.GreaterOrEqual(t, w.AnsweredAfter(t), PollWatched, "answered by a poll")
	}
}
