package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

func TestCacheConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) persistence.Store { return memory.NewCache(memory.New(), 16) })
}

func completedRecord(key, hash string, now time.Time) *persistence.Record {
	return &persistence.Record{Key: key, Status: persistence.StatusInProgress, ExpiresAt: now.Add(time.Hour),
		InProgressExpiresAt: now.Add(time.Minute), PayloadHash: hash, Token: "tok-" + key}
}

func TestCacheServesCompletedRecordsWithoutRequests(t *testing.T) {
	ctx := context.Background()
	counted := faultstore.New(memory.New())
	cache := memory.NewCache(counted, 8)
	now := time.Now().Truncate(time.Second)

	rec := completedRecord("k", "h1", now)
	require.NoError(t, cache.Put(ctx, rec, now))
	// An in-progress record is not cached: the next Put goes to the store.
	require.ErrorIs(t, cache.Put(ctx, completedRecord("k", "h1", now), now), persistence.ErrConflict)
	assert.Equal(t, 2, counted.Calls(faultstore.OpPut))

	done := *rec
	done.Status = persistence.StatusCompleted
	done.Response = []byte(`"ok"`)
	require.NoError(t, cache.Update(ctx, &done))
	assert.Equal(t, 1, cache.Len())

	err := cache.Put(ctx, completedRecord("k", "h1", now), now)
	var conflict *persistence.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.NotNil(t, conflict.Existing)
	assert.Equal(t, `"ok"`, string(conflict.Existing.Response))
	assert.Equal(t, 2, counted.Calls(faultstore.OpPut), "a cached replay makes no request")

	// Payload validation off: served from the cache too.
	require.ErrorAs(t, cache.Put(ctx, completedRecord("k", "", now), now), &conflict)
	assert.Equal(t, 2, counted.Calls(faultstore.OpPut))

	// Another payload hash is decided by the store.
	require.ErrorAs(t, cache.Put(ctx, completedRecord("k", "h2", now), now), &conflict)
	assert.Equal(t, 3, counted.Calls(faultstore.OpPut))
	assert.Equal(t, "h1", conflict.Existing.PayloadHash)

	// Past the expiry the cache does not answer, and the store lets the
	// key be taken over.
	later := now.Add(2 * time.Hour)
	require.NoError(t, cache.Put(ctx, completedRecord("k", "h1", later), later))
	assert.Equal(t, 4, counted.Calls(faultstore.OpPut))
	assert.Equal(t, 0, cache.Len())
}

func TestCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	counted := faultstore.New(memory.New())
	cache := memory.NewCache(counted, 3)
	now := time.Now().Truncate(time.Second)
	for i := range 5 {
		rec := completedRecord(fmt.Sprint("k", i), "", now)
		require.NoError(t, cache.Put(ctx, rec, now))
		rec.Status = persistence.StatusCompleted
		require.NoError(t, cache.Update(ctx, rec))
		if i == 2 {
			// Touch k0 so that it is the most recently used.
			require.ErrorIs(t, cache.Put(ctx, completedRecord("k0", "", now), now), persistence.ErrConflict)
		}
	}
	assert.Equal(t, 3, cache.Len())
	// k0 survived as recently used; k1 and k2 were evicted. (A miss caches
	// the record again, so the hits are checked first.)
	for _, tc := range []struct {
		key    string
		cached bool
	}{{"k0", true}, {"k3", true}, {"k4", true}, {"k1", false}, {"k2", false}} {
		before := counted.Calls(faultstore.OpPut)
		require.ErrorIs(t, cache.Put(ctx, completedRecord(tc.key, "", now), now), persistence.ErrConflict, tc.key)
		assert.Equal(t, tc.cached, counted.Calls(faultstore.OpPut) == before, "%s served from the cache", tc.key)
	}
}

func TestCacheWithWrap(t *testing.T) {
	counted := faultstore.New(memory.New())
	cache := memory.NewCache(counted, 100)
	runs := 0
	h := idempotency.Must(idempotency.Wrap(func(context.Context, string) (string, error) { runs++; return "done", nil }, cache))
	for range 3 {
		got, err := h(context.Background(), "order-1")
		require.NoError(t, err)
		assert.Equal(t, "done", got)
	}
	assert.Equal(t, 1, runs)
	assert.Equal(t, 1, counted.Calls(faultstore.OpPut), "replays from the local cache make no request")
	assert.Equal(t, 1, counted.Calls(faultstore.OpUpdate))
	assert.Equal(t, 0, counted.Calls(faultstore.OpGet))
}

func TestCacheForgetsReleasedKeys(t *testing.T) {
	ctx := context.Background()
	cache := memory.NewCache(memory.New(), 4)
	now := time.Now().Truncate(time.Second)
	rec := completedRecord("k", "", now)
	require.NoError(t, cache.Put(ctx, rec, now))
	require.NoError(t, cache.Delete(ctx, "k", rec.Token))
	assert.Equal(t, 0, cache.Len())
	require.NoError(t, cache.Put(ctx, completedRecord("k", "", now), now))
}

// A release that reaches the store after its key completed is refused
// (docs/protocol.md), and the key is still answered with its result.
func TestCacheLateReleaseKeepsTheResult(t *testing.T) {
	ctx := context.Background()
	cache := memory.NewCache(memory.New(), 4)
	now := time.Now().Truncate(time.Second)
	rec := completedRecord("k", "", now)
	require.NoError(t, cache.Put(ctx, rec, now))
	rec.Status = persistence.StatusCompleted
	require.NoError(t, cache.Update(ctx, rec))
	require.ErrorIs(t, cache.Delete(ctx, "k", rec.Token), persistence.ErrFenced)
	err := cache.Put(ctx, completedRecord("k", "", now), now)
	var conflict *persistence.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, persistence.StatusCompleted, conflict.Existing.Status)
}

func TestCacheRemembersOmittedResponses(t *testing.T) {
	ctx := context.Background()
	cache := memory.NewCache(memory.New(func(o *memory.Options) { o.MaxResponseSize = 1 }), 4)
	now := time.Now().Truncate(time.Second)
	rec := completedRecord("k", "", now)
	require.NoError(t, cache.Put(ctx, rec, now))
	rec.Status = persistence.StatusCompleted
	rec.Response = []byte("too large")
	require.ErrorIs(t, cache.Update(ctx, rec), persistence.ErrResponseOmitted)
	err := cache.Put(ctx, completedRecord("k", "", now), now)
	var conflict *persistence.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.True(t, conflict.Existing.ResponseOmitted)
	assert.Empty(t, conflict.Existing.Response)
}
