package idempotency_test

import (
	"context"
	"errors"
	"fmt"
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

// ledgerStore is a committing store for the core's tests: the memory
// store, and a ledger that staged writes add entries to, atomically with
// the completion. The DynamoDB store is the real one; its tests run
// against DynamoDB Local.
type ledgerStore struct {
	*memory.Store
	mu     sync.Mutex
	ledger map[string]int
}

// entry is a staged write of a ledgerStore: it adds an entry, unless one
// named the same exists when unique is set (a condition that fails).
type entry struct {
	name   string
	unique bool
}

func newLedgerStore() *ledgerStore {
	return &ledgerStore{Store: memory.New(), ledger: map[string]int{}}
}

func (s *ledgerStore) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, err := s.Get(ctx, rec.Key)
	if err != nil || stored.Token != rec.Token {
		return persistence.ErrFenced
	}
	for i, w := range writes {
		if e := w.(entry); e.unique && s.ledger[e.name] > 0 {
			return &persistence.CommitCanceledError{Err: fmt.Errorf("transaction canceled: write %d: ConditionalCheckFailed", i)}
		}
	}
	for _, w := range writes {
		s.ledger[w.(entry).name]++
	}
	return s.Update(ctx, rec)
}

func (s *ledgerStore) entries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger[name]
}

// charge stages one ledger entry for the order, as a payment handler
// stages its ledger write.
func charge(c *counter, unique bool) func(context.Context, order) (receipt, error) {
	return func(ctx context.Context, o order) (receipt, error) {
		r, err := c.handle(ctx, o)
		if err != nil {
			return r, err
		}
		if err := persistence.Stage(ctx, entry{name: o.OrderID, unique: unique}); err != nil {
			return receipt{}, err
		}
		return r, nil
	}
}

func TestTransactionsCommitWithTheCompletion(t *testing.T) {
	store := newLedgerStore()
	var c counter
	h := mustWrap(t, charge(&c, false), store, idempotency.WithTransactions())
	first, err := h(t.Context(), o1)
	require.NoError(t, err)
	again, err := h(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, 1, c.count())
	assert.Equal(t, 1, store.entries(o1.OrderID))
}

func TestTransactionsHandlerErrorWritesNothing(t *testing.T) {
	store := newLedgerStore()
	boom := errors.New("boom")
	c := counter{fail: func(run int) error {
		if run == 1 {
			return boom
		}
		return nil
	}}
	h := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
		// Staged before the failure: not written.
		require.NoError(t, persistence.Stage(ctx, entry{name: o.OrderID}))
		return c.handle(ctx, o)
	}, store, idempotency.WithTransactions())
	_, err := h(t.Context(), o1)
	require.Same(t, boom, err)
	assert.Zero(t, store.entries(o1.OrderID))
	_, err = h(t.Context(), o1)
	require.NoError(t, err, "the key was released: the retry runs")
	assert.Equal(t, 1, store.entries(o1.OrderID))
}

// A staged write whose own condition fails cancels the commit: nothing is
// written, the caller gets the reasons, and the key is released.
func TestTransactionsCanceledReleasesTheKey(t *testing.T) {
	store := newLedgerStore()
	store.ledger[o1.OrderID] = 1 // the condition of the unique entry fails
	var c counter
	var ev eventLog
	h := mustWrap(t, charge(&c, true), store, idempotency.WithTransactions(), idempotency.WithObserver(&ev),
		idempotency.WithLogger(discardLogger()))
	got, err := h(t.Context(), o1)
	var ce *idempotency.CommitError
	require.ErrorAs(t, err, &ce)
	assert.ErrorAs(t, err, new(*idempotency.CommitError))
	assert.False(t, ce.Unknown)
	var canceled *persistence.CommitCanceledError
	require.ErrorAs(t, err, &canceled)
	assert.ErrorContains(t, canceled, "write 0: ConditionalCheckFailed")
	assert.Zero(t, got, "no result for writes that did not commit")
	assert.Equal(t, 1, store.entries(o1.OrderID), "nothing written")
	assert.Contains(t, ev.list(), "commit canceled")
	assert.Contains(t, ev.list(), "release")

	store.mu.Lock()
	store.ledger[o1.OrderID] = 0
	store.mu.Unlock()
	_, err = h(t.Context(), o1)
	require.NoError(t, err, "released: the retry runs")
	assert.Equal(t, 2, c.count())
}

// A late finisher, overtaken after its deadline, commits nothing.
func TestTransactionsFencedCommitWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newLedgerStore()
		var fastRuns counter
		g := newGate()
		slow := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
			require.NoError(t, persistence.Stage(ctx, entry{name: o.OrderID}))
			return g.handle(ctx, o)
		}, store, idempotency.WithKeyPrefix("p"), idempotency.WithTransactions(), idempotency.WithLogger(discardLogger()))
		fast := mustWrap(t, charge(&fastRuns, false), store, idempotency.WithKeyPrefix("p"), idempotency.WithTransactions())

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		result := waitFor(ctx, slow, o1)
		<-g.entered
		time.Sleep(11 * time.Second)
		_, err := fast(t.Context(), o1)
		require.NoError(t, err)
		close(g.open)
		_, err = result()
		var ce *idempotency.CommitError
		require.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, persistence.ErrFenced)
		assert.Equal(t, 1, store.entries(o1.OrderID), "only the call that owned the key wrote")
	})
}

// A commit whose reply is lost may have happened: the caller is told so,
// the key stays reserved, and a retry gets the committed result.
func TestTransactionsUnknownOutcome(t *testing.T) {
	store := faultstore.New(newLedgerStore())
	store.Fault = faultstore.On(faultstore.OpCommit, 1, faultstore.LoseReply)
	var c counter
	h := mustWrap(t, charge(&c, false), store, idempotency.WithTransactions(), idempotency.WithLogger(discardLogger()))
	_, err := h(t.Context(), o1)
	var ce *idempotency.CommitError
	require.ErrorAs(t, err, &ce)
	assert.True(t, ce.Unknown)
	got, err := h(t.Context(), o1)
	require.NoError(t, err, "the commit happened: the retry replays it")
	assert.Equal(t, "ch_o-1_1", got.ChargeID)
	assert.Equal(t, 1, c.count())
	assert.Equal(t, 1, store.Inner.(*ledgerStore).entries(o1.OrderID))
}

// A function that dies after staging its write, before the commit, leaves
// nothing: the retry after its deadline writes the one entry.
func TestTransactionsCrashBeforeTheCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newLedgerStore()
		hang := make(chan struct{})
		dying := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
			require.NoError(t, persistence.Stage(ctx, entry{name: o.OrderID}))
			<-hang // killed here
			return receipt{}, errors.New("killed")
		}, store, idempotency.WithKeyPrefix("p"), idempotency.WithTransactions())
		var c counter
		retry := mustWrap(t, charge(&c, false), store, idempotency.WithKeyPrefix("p"), idempotency.WithTransactions())

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		go func() { _, _ = dying(ctx, o1) }()
		synctest.Wait()
		assert.Zero(t, store.entries(o1.OrderID))
		time.Sleep(6 * time.Second)
		_, err := retry(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, 1, store.entries(o1.OrderID))
		close(hang)
	})
}

func TestTransactionsNeedACommittingStore(t *testing.T) {
	var c counter
	_, err := idempotency.Wrap(c.handle, memory.New(), idempotency.WithTransactions())
	assert.ErrorContains(t, err, "commits no writes with a completion")
	_, err = idempotency.Wrap(c.handle, memory.NewCache(memory.New(), 8), idempotency.WithTransactions())
	assert.Error(t, err, "a cache over a store that does not commit")
	_, err = idempotency.Wrap(c.handle, memory.NewCache(newLedgerStore(), 8), idempotency.WithTransactions())
	assert.NoError(t, err, "a cache over a committing store")

	const noStaging = "persistence: nothing to stage writes in"
	assert.ErrorContains(t, persistence.Stage(t.Context(), entry{}), noStaging)
	h := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
		return receipt{}, persistence.Stage(ctx, entry{})
	}, memory.New())
	_, err = h(t.Context(), o1)
	assert.ErrorContains(t, err, noStaging, "without WithTransactions")
}

// Through the local cache: the commit passes through, and the completed
// record is cached.
func TestTransactionsThroughTheLocalCache(t *testing.T) {
	inner := newLedgerStore()
	counted := faultstore.New(inner)
	store := memory.NewCache(counted, 8)
	var c counter
	h := mustWrap(t, charge(&c, false), store, idempotency.WithTransactions())
	callAndRetry(t, h, o1, 2)
	assert.Equal(t, 1, inner.entries(o1.OrderID))
	assert.Equal(t, 1, counted.Calls(faultstore.OpCommit))
	assert.Equal(t, 1, counted.Calls(faultstore.OpPut), "the replays come from the cache")
}
