package idempotency_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A call marked as likely a retry reads its record first and answers a
// completed one from the read; anything else goes on to the reservation,
// which decides as it always does.
func TestLikelyRetryReadsFirst(t *testing.T) {
	ok := func(context.Context) ([]byte, error) { return []byte(`"done"`), nil }
	setup := func(t *testing.T) (*faultstore.Store, *idempotency.Guard) {
		t.Helper()
		// faultstore hides memory.Store's LocalReader: the Guard reads over
		// requests, as from DynamoDB.
		store := faultstore.New(memory.New())
		g, err := idempotency.NewGuard(store, idempotency.WithKeyPrefix("readfirst"))
		require.NoError(t, err)
		return store, g
	}
	calls := func(s *faultstore.Store) map[faultstore.Op]int {
		return map[faultstore.Op]int{faultstore.OpGet: s.Calls(faultstore.OpGet), faultstore.OpPut: s.Calls(faultstore.OpPut), faultstore.OpUpdate: s.Calls(faultstore.OpUpdate)}
	}
	retry := func(t *testing.T) context.Context { return core.WithLikelyRetry(t.Context()) }
	// completedKey returns a store whose key "k" a call completed, and the
	// Guard of that call.
	completedKey := func(t *testing.T) (*faultstore.Store, *idempotency.Guard) {
		t.Helper()
		store, g := setup(t)
		_, err := g.Do(t.Context(), "k", "p", ok)
		require.NoError(t, err)
		return store, g
	}
	// replaysByARead checks that a likely retry through g replays the
	// stored result, and that the store saw the first call and one read.
	replaysByARead := func(t *testing.T, store *faultstore.Store, g *idempotency.Guard) {
		t.Helper()
		res, err := g.Do(retry(t), "k", "p", func(context.Context) ([]byte, error) { t.Fatal("ran again"); return nil, nil })
		require.NoError(t, err)
		assert.Equal(t, idempotency.OutcomeReplay, res.Outcome)
		assert.Equal(t, `"done"`, string(res.Response))
		assert.Equal(t, map[faultstore.Op]int{faultstore.OpGet: 1, faultstore.OpPut: 1, faultstore.OpUpdate: 1}, calls(store))
	}

	t.Run("CompletedIsAnsweredByTheRead", func(t *testing.T) {
		store, g := completedKey(t)
		replaysByARead(t, store, g)
	})
	t.Run("NoRecordRuns", func(t *testing.T) {
		store, g := setup(t)
		res, err := g.Do(retry(t), "k", "p", ok)
		require.NoError(t, err)
		assert.Equal(t, idempotency.OutcomeNew, res.Outcome)
		assert.Equal(t, map[faultstore.Op]int{faultstore.OpGet: 1, faultstore.OpPut: 1, faultstore.OpUpdate: 1}, calls(store))
	})
	t.Run("OtherPayloadIsAMismatch", func(t *testing.T) {
		store, g := completedKey(t)
		res, err := g.Do(retry(t), "k", "other", ok)
		var mismatch *idempotency.PayloadMismatchError
		require.ErrorAs(t, err, &mismatch)
		assert.Equal(t, idempotency.OutcomePayloadMismatch, res.Outcome)
		assert.Equal(t, 1, store.Calls(faultstore.OpPut), "no write after the read")
	})
	t.Run("InProgressGoesOnToTheReservation", func(t *testing.T) {
		store, g := setup(t)
		started, release := make(chan struct{}), make(chan struct{})
		done := make(chan error)
		go func() {
			_, err := g.Do(t.Context(), "k", "p", func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte(`"done"`), nil
			})
			done <- err
		}()
		<-started
		// Another Guard over the store: a call in another process.
		other, err := idempotency.NewGuard(store, idempotency.WithKeyPrefix("readfirst"))
		require.NoError(t, err)
		res, err := other.Do(retry(t), "k", "p", ok)
		var inProgress *idempotency.InProgressError
		require.ErrorAs(t, err, &inProgress)
		assert.Equal(t, idempotency.OutcomeInProgress, res.Outcome)
		assert.Equal(t, 1, store.Calls(faultstore.OpGet))
		assert.Equal(t, 2, store.Calls(faultstore.OpPut), "the reservation decides")
		close(release)
		require.NoError(t, <-done)
	})
	t.Run("AFailedReadGoesOnToTheReservation", func(t *testing.T) {
		store, g := completedKey(t)
		store.Fault = func(op faultstore.Op, _ string, _ int) faultstore.Fault {
			if op == faultstore.OpGet {
				return faultstore.FailBefore
			}
			return faultstore.None
		}
		res, err := g.Do(retry(t), "k", "p", ok)
		require.NoError(t, err)
		assert.Equal(t, idempotency.OutcomeReplay, res.Outcome)
		assert.Equal(t, 2, store.Calls(faultstore.OpPut))
	})
	t.Run("ALocalCacheThatMissesReadsTheStore", func(t *testing.T) {
		store, _ := completedKey(t)
		// Another execution environment, whose cache has not seen the key.
		cached, err := idempotency.NewGuard(memory.NewCache(store, 10), idempotency.WithKeyPrefix("readfirst"))
		require.NoError(t, err)
		replaysByARead(t, store, cached)
	})
	t.Run("UnmarkedCallsWriteFirst", func(t *testing.T) {
		store, g := setup(t)
		for range 2 {
			_, err := g.Do(t.Context(), "k", "p", ok)
			require.NoError(t, err)
		}
		assert.Equal(t, map[faultstore.Op]int{faultstore.OpGet: 0, faultstore.OpPut: 2, faultstore.OpUpdate: 1}, calls(store))
	})
}
