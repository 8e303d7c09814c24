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
