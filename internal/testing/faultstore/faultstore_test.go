package faultstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func reservation(key, token string) *persistence.Record {
	return &persistence.Record{Key: key, Status: persistence.StatusInProgress, Token: token,
		ExpiresAt: now.Add(time.Hour), InProgressExpiresAt: now.Add(time.Minute)}
}

type ctxKey struct{}

func TestApplyLateTimesOutAndWritesWhenApplied(t *testing.T) {
	inner := memory.New()
	s := faultstore.New(inner)
	s.Fault = faultstore.On(faultstore.OpPut, 1, faultstore.ApplyLate)

	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "caller"))
	rec := reservation("k", "t1")
	err := s.Put(ctx, rec, now)
	require.ErrorIs(t, err, faultstore.ErrInjected)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the caller sees a timeout")
	_, err = inner.Get(t.Context(), "k")
	require.ErrorIs(t, err, persistence.ErrNotFound, "nothing reached the store yet")

	// The caller moves on: it changes its record and its context ends.
	rec.Token = "changed"
	cancel()

	held := s.TakeHeld()
	require.Len(t, held, 1)
	assert.Equal(t, faultstore.OpPut, held[0].Op)
	assert.Equal(t, "t1", held[0].Record.Token, "the held write is a copy, taken when it was held")
	assert.Empty(t, s.TakeHeld(), "taken once")

	require.NoError(t, held[0].Apply(t.Context()))
	got, err := inner.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, "t1", got.Token, "the write as it was sent")

	// Applied once: a second Apply returns the first result and writes nothing.
	require.NoError(t, inner.Delete(t.Context(), "k", "t1"))
	require.NoError(t, held[0].Apply(t.Context()))
	_, err = inner.Get(t.Context(), "k")
	require.ErrorIs(t, err, persistence.ErrNotFound)
}

// valueStore records the context value of each write it receives.
type valueStore struct {
	persistence.Store
	seen []any
}

func (s *valueStore) Update(ctx context.Context, rec *persistence.Record) error {
	s.seen = append(s.seen, ctx.Value(ctxKey{}))
	return s.Store.Update(ctx, rec)
}

func TestApplyLateGivesOnHoldEveryWrite(t *testing.T) {
	inner := &valueStore{Store: memory.New()}
	s := faultstore.New(inner)
	s.Fault = func(faultstore.Op, string, int) faultstore.Fault { return faultstore.ApplyLate }
	var held []*faultstore.Held
	s.OnHold = func(ctx context.Context, h *faultstore.Held) {
		assert.Equal(t, "caller", ctx.Value(ctxKey{}), "OnHold gets the caller's context")
		held = append(held, h)
	}
	ctx := context.WithValue(t.Context(), ctxKey{}, "caller")
	done := reservation("k", "t1")
	done.Status, done.InProgressExpiresAt, done.Response = persistence.StatusCompleted, time.Time{}, []byte(`"ok"`)

	for _, err := range []error{
		s.Put(ctx, reservation("k", "t1"), now),
		s.Update(ctx, done),
		s.Delete(ctx, "k", "t1"),
	} {
		require.ErrorIs(t, err, faultstore.ErrInjected)
	}
	done.Response[1] = 'X' // the caller's buffer, reused
	_, err := s.Get(ctx, "k")
	require.ErrorIs(t, err, faultstore.ErrInjected, "a read is not held: it fails")
	require.Len(t, held, 3)
	assert.Empty(t, s.TakeHeld(), "OnHold took them")

	// Applied in another order than they were sent, with a context of
	// their own that keeps the caller's values.
	require.ErrorIs(t, held[1].Apply(t.Context()), persistence.ErrFenced, "nothing to complete yet")
	require.NoError(t, held[0].Apply(t.Context()))
	require.ErrorIs(t, held[1].Apply(t.Context()), persistence.ErrFenced, "applied once: the first result")
	assert.Equal(t, []any{"caller"}, inner.seen)
	got, err := inner.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, persistence.StatusInProgress, got.Status)

	assert.Equal(t, faultstore.OpDelete, held[2].Op)
	assert.Nil(t, held[2].Record)
	assert.Equal(t, `"ok"`, string(held[1].Record.Response), "a copy of the response, taken when it was held")
}

// txStore is a persistence.TxStore over a memory store whose transactions
// record how they end.
type txStore struct {
	*memory.Store
	txs []*fakeTx
}

type fakeTx struct {
	s                     *txStore
	committed, rolledBack int
}

func (s *txStore) BeginTx(ctx context.Context, _ *persistence.Record) (context.Context, persistence.Tx, error) {
	tx := &fakeTx{s: s}
	s.txs = append(s.txs, tx)
	return ctx, tx, nil
}

func (tx *fakeTx) Commit(ctx context.Context, rec *persistence.Record) error {
	tx.committed++
	return tx.s.Update(ctx, rec)
}

func (tx *fakeTx) Rollback(context.Context) error {
	tx.rolledBack++
	return nil
}

func TestBeginTxFaults(t *testing.T) {
	for _, tc := range []struct {
		fault faultstore.Fault
		// began and rolledBack are the transactions begun, and of those
		// rolled back, before the caller gets its answer.
		began, rolledBack int
		ok                bool
	}{
		{faultstore.None, 1, 0, true},
		{faultstore.FailBefore, 0, 0, false},
		{faultstore.ApplyLate, 0, 0, false},
		{faultstore.LoseReply, 1, 1, false},
		{faultstore.RetryAfterLostReply, 2, 1, true},
	} {
		inner := &txStore{Store: memory.New()}
		s := faultstore.New(inner)
		s.Fault = faultstore.On(faultstore.OpBegin, 1, tc.fault)
		_, tx, err := s.BeginTx(t.Context(), reservation("k", "t1"))
		if tc.ok {
			require.NoError(t, err, "fault %d", tc.fault)
			require.NotNil(t, tx)
		} else {
			require.ErrorIs(t, err, faultstore.ErrInjected, "fault %d", tc.fault)
			require.Nil(t, tx)
		}
		require.Len(t, inner.txs, tc.began, "fault %d", tc.fault)
		rolledBack := 0
		for _, tx := range inner.txs {
			rolledBack += tx.rolledBack
		}
		assert.Equal(t, tc.rolledBack, rolledBack, "fault %d", tc.fault)
		assert.Equal(t, 1, s.Calls(faultstore.OpBegin))
	}
}

func TestTxCommitFaults(t *testing.T) {
	for _, tc := range []struct {
		fault                 faultstore.Fault
		committed, rolledBack int
		ok                    bool
	}{
		{faultstore.None, 1, 0, true},
		{faultstore.FailBefore, 0, 1, false},
		{faultstore.LoseReply, 1, 0, false},
		{faultstore.RetryAfterLostReply, 1, 0, false}, // a COMMIT is not sent again
	} {
		inner := &txStore{Store: memory.New()}
		rec := reservation("k", "t1")
		require.NoError(t, inner.Put(t.Context(), rec, now))
		s := faultstore.New(inner)
		s.Fault = faultstore.On(faultstore.OpCommit, 1, tc.fault)
		_, tx, err := s.BeginTx(t.Context(), rec)
		require.NoError(t, err)
		done := *rec
		done.Status = persistence.StatusCompleted
		err = tx.Commit(t.Context(), &done)
		if tc.ok {
			require.NoError(t, err, "fault %d", tc.fault)
		} else {
			require.ErrorIs(t, err, faultstore.ErrInjected, "fault %d", tc.fault)
		}
		require.NoError(t, tx.Rollback(t.Context()), "after the commit, a rollback does nothing")
		assert.Equal(t, tc.committed, inner.txs[0].committed, "fault %d", tc.fault)
		assert.Equal(t, tc.rolledBack, inner.txs[0].rolledBack, "fault %d", tc.fault)
		got, err := inner.Get(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, tc.committed == 1, got.Status == persistence.StatusCompleted, "fault %d", tc.fault)
	}
}

// A commit held back runs on its transaction when applied: the caller's
// rollback, after its commit timed out, does not end the transaction.
func TestTxCommitApplyLate(t *testing.T) {
	inner := &txStore{Store: memory.New()}
	rec := reservation("k", "t1")
	require.NoError(t, inner.Put(t.Context(), rec, now))
	s := faultstore.New(inner)
	s.Fault = faultstore.On(faultstore.OpCommit, 1, faultstore.ApplyLate)
	_, tx, err := s.BeginTx(t.Context(), rec)
	require.NoError(t, err)
	done := *rec
	done.Status = persistence.StatusCompleted
	err = tx.Commit(t.Context(), &done)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, tx.Rollback(t.Context()))
	assert.Zero(t, inner.txs[0].committed+inner.txs[0].rolledBack, "the transaction is open, its commit held")

	held := s.TakeHeld()
	require.Len(t, held, 1)
	assert.Equal(t, faultstore.OpCommit, held[0].Op)
	require.NoError(t, held[0].Apply(t.Context()))
	assert.Equal(t, 1, inner.txs[0].committed)
	got, err := inner.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, persistence.StatusCompleted, got.Status)
}
