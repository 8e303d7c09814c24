package redis_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// listed returns the records List finds, by key, and their sorted keys.
func listed(t *testing.T, store *redisstore.Store, prefix string, pageSize int) ([]string, map[string]*persistence.Record) {
	t.Helper()
	recs := map[string]*persistence.Record{}
	require.NoError(t, store.List(t.Context(), prefix, pageSize, func(page []*persistence.Record) error {
		for _, rec := range page {
			recs[rec.Key] = rec
		}
		return nil
	}))
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, recs
}

// putRecords writes in-progress records for keys, and completes every
// other one.
func putRecords(t *testing.T, store *redisstore.Store, now time.Time, keys ...string) {
	t.Helper()
	for i, key := range keys {
		rec := recordtest.InProgress(key, now)
		require.NoError(t, store.Put(t.Context(), rec, now))
		if i%2 == 0 {
			require.NoError(t, store.Update(t.Context(), completed(rec, `{"receipt":1}`)))
		}
	}
}

func TestList(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	store := newStore(t, client, withPrefix("idem:"))
	now := testNow()
	putRecords(t, store, now, "orders#1", "orders#2", "orders[x]#3", "refunds#1")
	// Other data under the prefix and beside it is not listed.
	ctx := t.Context()
	require.NoError(t, client.HSet(ctx, "idem:cart", "items", "3").Err())
	require.NoError(t, client.Set(ctx, "idem:counter", "7", 0).Err())
	require.NoError(t, newStore(t, client, withPrefix("other:")).Put(ctx, recordtest.InProgress("orders#9", now), now))

	keys, recs := listed(t, store, "", 2)
	require.Equal(t, []string{"orders#1", "orders#2", "orders[x]#3", "refunds#1"}, keys)
	require.Equal(t, persistence.StatusCompleted, recs["orders#1"].Status)
	require.Nil(t, recs["orders#1"].Response, "List leaves responses out")
	require.Equal(t, persistence.StatusInProgress, recs["orders#2"].Status)
	require.Equal(t, now.Add(time.Hour), recs["orders#2"].ExpiresAt)
	require.NotEmpty(t, recs["orders#2"].Token)

	keys, _ = listed(t, store, "orders[x]", 0)
	require.Equal(t, []string{"orders[x]#3"}, keys, "glob characters in the prefix are literal")

	stop := errors.New("stop")
	require.ErrorIs(t, store.List(ctx, "", 1, func([]*persistence.Record) error { return stop }), stop)
}

func TestListCluster(t *testing.T) {
	cluster := redisserver.StartCluster(t, 1)
	client := cluster.NewClient(func(o *redis.ClusterOptions) { o.ReadOnly = true })
	store := newStore(t, client, withPrefix("idempotency:"))
	putRecords(t, store, testNow(), "a#1", "b#2", "c#3")
	keys, _ := listed(t, store, "", 0)
	require.Equal(t, []string{"a#1", "b#2", "c#3"}, keys)
}

func TestDeleteRecord(t *testing.T) {
	store := newStore(t, redisserver.Start(t).NewClient())
	ctx := t.Context()
	now := testNow()
	rec := recordtest.InProgress("orders#1", now)
	require.NoError(t, store.Put(ctx, rec, now))
	seen, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)

	// It completes with the same token: a delete conditioned on the
	// token alone would remove the completion.
	require.NoError(t, store.Update(ctx, completed(rec, `"ok"`)))
	require.ErrorIs(t, store.DeleteRecord(ctx, seen), persistence.ErrChanged)
	done, err := store.Get(ctx, rec.Key)
	require.NoError(t, err, "the completed record is kept")

	other := *done
	other.ExpiresAt = other.ExpiresAt.Add(time.Second)
	require.ErrorIs(t, store.DeleteRecord(ctx, &other), persistence.ErrChanged, "another expiry")
	other = *done
	other.InProgressExpiresAt = time.Time{}
	require.ErrorIs(t, store.DeleteRecord(ctx, &other), persistence.ErrChanged, "no in-progress expiry")
	require.NoError(t, store.DeleteRecord(ctx, done))
	require.ErrorIs(t, store.DeleteRecord(ctx, done), persistence.ErrNotFound)

	// A record without an in-progress expiry.
	rec = recordtest.InProgress("orders#2", now)
	rec.InProgressExpiresAt = time.Time{}
	require.NoError(t, store.Put(ctx, rec, now))
	seen, err = store.Get(ctx, rec.Key)
	require.NoError(t, err)
	require.NoError(t, store.DeleteRecord(ctx, seen))
}
