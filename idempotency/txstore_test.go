package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// txStore is a persistence.TxStore over the memory store, with a ledger
// the function writes to in its transaction: the writes of a transaction
// are held until its commit, which applies them with the completion, or
// not at all.
type txStore struct {
	*memory.Store
	mu     sync.Mutex
	ledger map[string]int // entries by order, committed
	// beginErr and commitErr, when set, are what BeginTx and Commit return.
	beginErr, commitErr error
	rollbacks           int
}

func newTxStore() *txStore { return &txStore{Store: memory.New(), ledger: map[string]int{}} }

type fakeTx struct {
	s       *txStore
	pending []string
	done    bool
}

type txKey struct{}

func (s *txStore) BeginTx(ctx context.Context, _ *persistence.Record) (context.Context, persistence.Tx, error) {
	if s.beginErr != nil {
		return ctx, nil, s.beginErr
	}
	tx := &fakeTx{s: s}
	return context.WithValue(ctx, txKey{}, tx), tx, nil
}

func (tx *fakeTx) Commit(ctx context.Context, rec *persistence.Record) error {
	s := tx.s
	s.mu.Lock()
	defer s.mu.Unlock()
	tx.done = true
	if s.commitErr != nil {
		return s.commitErr
	}
	if err := s.Store.Update(ctx, rec); err != nil {
		return err
	}
	for _, order := range tx.pending {
		s.ledger[order]++
	}
	return nil
}

func (tx *fakeTx) Rollback(context.Context) error {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	if !tx.done {
		tx.done = true
		tx.s.rollbacks++
	}
	return nil
}

func (s *txStore) entries(order string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger[order]
}

// ledgered charges o with a ledger entry written in the transaction the
// context carries, and fails or panics as told.
func ledgered(fail error, panics bool) func(context.Context, order) (receipt, error) {
	return func(ctx context.Context, o order) (receipt, error) {
		tx, ok := ctx.Value(txKey{}).(*fakeTx)
		if !ok {
			return receipt{}, errors.New("no transaction in the function's context")
		}
		tx.pending = append(tx.pending, o.OrderID)
		if panics {
			panic("after the write")
		}
		return receipt{ChargeID: "ch_" + o.OrderID}, fail
	}
}

// With a store whose transactions the function writes in, the function's
// writes and the completion commit together, or neither does.
func TestTransactionOfTheStore(t *testing.T) {
	opts := func() []idempotency.WrapOption {
		return []idempotency.WrapOption{idempotency.WithTransactions(), idempotency.WithKey("order_id"), idempotency.WithLogger(discardLogger())}
	}
	t.Run("commits with the completion", func(t *testing.T) {
		s := newTxStore()
		charge := mustWrap(t, ledgered(nil, false), s, opts()...)
		first, err := charge(t.Context(), o1)
		require.NoError(t, err)
		again, err := charge(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, first, again)
		assert.Equal(t, 1, s.entries(o1.OrderID))
	})
	t.Run("a function error rolls back and releases", func(t *testing.T) {
		s := newTxStore()
		boom := errors.New("declined")
		charge := mustWrap(t, ledgered(boom, false), s, opts()...)
		_, err := charge(t.Context(), o1)
		require.Same(t, boom, err)
		assert.Zero(t, s.entries(o1.OrderID))
		assert.Equal(t, 1, s.rollbacks)
		assert.Zero(t, s.Len(), "the key was released")
	})
	t.Run("a panic rolls back and releases", func(t *testing.T) {
		s := newTxStore()
		charge := mustWrap(t, ledgered(nil, true), s, opts()...)
		require.Panics(t, func() { _, _ = charge(t.Context(), o1) })
		assert.Zero(t, s.entries(o1.OrderID))
		assert.Equal(t, 1, s.rollbacks)
		assert.Zero(t, s.Len(), "the key was released")
	})
	t.Run("a refused commit releases the key", func(t *testing.T) {
		s := newTxStore()
		s.commitErr = &persistence.CommitCanceledError{Err: errors.New("serialization failure")}
		charge := mustWrap(t, ledgered(nil, false), s, opts()...)
		_, err := charge(t.Context(), o1)
		var commitErr *idempotency.CommitError
		require.ErrorAs(t, err, &commitErr)
		assert.False(t, commitErr.Unknown)
		assert.Zero(t, s.Len(), "the key was released")
	})
	t.Run("a fenced commit writes nothing", func(t *testing.T) {
		s := newTxStore()
		s.commitErr = persistence.ErrFenced
		charge := mustWrap(t, ledgered(nil, false), s, opts()...)
		_, err := charge(t.Context(), o1)
		require.ErrorIs(t, err, persistence.ErrFenced)
		assert.Zero(t, s.entries(o1.OrderID))
	})
	t.Run("a commit of unknown outcome keeps the key", func(t *testing.T) {
		s := newTxStore()
		s.commitErr = errors.New("connection reset during COMMIT")
		charge := mustWrap(t, ledgered(nil, false), s, opts()...)
		_, err := charge(t.Context(), o1)
		var commitErr *idempotency.CommitError
		require.ErrorAs(t, err, &commitErr)
		assert.True(t, commitErr.Unknown)
		_, err = charge(t.Context(), o1)
		require.ErrorIs(t, err, idempotency.ErrInProgress)
	})
	t.Run("a transaction that cannot begin runs nothing", func(t *testing.T) {
		s := newTxStore()
		s.beginErr = errors.New("too many connections")
		var ran bool
		charge := mustWrap(t, func(ctx context.Context, o order) (receipt, error) { ran = true; return receipt{}, nil }, s, opts()...)
		_, err := charge(t.Context(), o1)
		var storeErr *idempotency.StoreError
		require.ErrorAs(t, err, &storeErr)
		assert.Equal(t, "begin", storeErr.Op)
		assert.False(t, ran)
		assert.Zero(t, s.Len(), "the key was released")
	})
	t.Run("through the local cache", func(t *testing.T) {
		s := newTxStore()
		cache := memory.NewCache(s, 8)
		charge := mustWrap(t, ledgered(nil, false), cache, opts()...)
		for range 3 {
			_, err := charge(t.Context(), o1)
			require.NoError(t, err)
		}
		assert.Equal(t, 1, s.entries(o1.OrderID))
		assert.Equal(t, 1, cache.Len(), "the committed record is cached")
	})
}
