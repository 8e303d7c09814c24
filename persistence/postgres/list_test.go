package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// listAll returns the keys that List reads with prefix, page by page, and
// checks that no page is larger than size and no record has a response.
func listAll(t *testing.T, store *postgres.Store, prefix string, size int) []string {
	t.Helper()
	var keys []string
	require.NoError(t, store.List(t.Context(), prefix, size, func(recs []*persistence.Record) error {
		require.NotEmpty(t, recs)
		if size > 0 {
			require.LessOrEqual(t, len(recs), size)
		}
		for _, r := range recs {
			require.Nil(t, r.Response, "List returned the response of %s", r.Key)
			keys = append(keys, r.Key)
		}
		return nil
	}))
	return keys
}

func TestList(t *testing.T) {
	_, store := setup(t)
	ctx := t.Context()
	now := testNow()
	var want []string
	put := func(key string) *persistence.Record {
		rec := recordtest.InProgress(key, now)
		require.NoError(t, store.Put(ctx, rec, now))
		require.NoError(t, store.Update(ctx, completed(rec, `{"big":"response"}`)))
		return rec
	}
	for i := range 23 {
		want = append(want, put(fmt.Sprintf("payments#%03d", i)).Key)
	}
	others := []string{"payments", "payments$", "paymentsé#1", "orders#1", "é#1", "\U0010FFFF#1"}
	for _, k := range others {
		put(k)
	}

	for _, size := range []int{0, 1, 7, 23, 100} {
		require.Equal(t, want, listAll(t, store, "payments#", size), "page size %d", size)
	}
	all := append(slices.Clone(want), others...)
	slices.Sort(all) // byte order
	require.Equal(t, all, listAll(t, store, "", 5))
	require.Equal(t, []string{"é#1"}, listAll(t, store, "é", 2))
	require.Equal(t, []string{"\U0010FFFF#1"}, listAll(t, store, "\U0010FFFF", 0))
	require.Empty(t, listAll(t, store, "nothing", 0))

	// A record as List reads it: everything but the response.
	var got *persistence.Record
	require.NoError(t, store.List(ctx, "orders#", 0, func(recs []*persistence.Record) error { got = recs[0]; return nil }))
	full, err := store.Get(ctx, "orders#1")
	require.NoError(t, err)
	full.Response = nil
	requireRecord(t, full, got)

	stop := errors.New("stop")
	pages := 0
	err = store.List(ctx, "payments#", 5, func([]*persistence.Record) error { pages++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, pages)
	require.ErrorContains(t, store.List(ctx, "", -1, nil), "negative page size")
}

func TestListStuck(t *testing.T) {
	_, store := setup(t)
	ctx := t.Context()
	now := testNow()
	var want []string
	// Stuck: in progress past their in-progress expiry, in its order.
	for i := range 12 {
		rec := recordtest.InProgress(fmt.Sprintf("stuck#%02d", i), now.Add(-time.Minute))
		rec.InProgressExpiresAt = now.Add(-time.Duration(12-i) * time.Second / 2) // two share each time
		require.NoError(t, store.Put(ctx, rec, now.Add(-time.Minute)))
		want = append(want, rec.Key)
	}
	// Not stuck: in progress, completed, completed past its in-progress
	// expiry.
	require.NoError(t, store.Put(ctx, recordtest.InProgress("running#1", now), now))
	done := recordtest.InProgress("done#1", now.Add(-time.Minute))
	done.InProgressExpiresAt = now.Add(-time.Second)
	require.NoError(t, store.Put(ctx, done, now.Add(-time.Minute)))
	require.NoError(t, store.Update(ctx, completed(done, `1`)))
	kept := *done
	kept.Key = "done#2"
	kept.Token = "t2"
	require.NoError(t, store.Put(ctx, &kept, now.Add(-time.Minute)))
	c := *completed(&kept, `2`)
	c.InProgressExpiresAt = kept.InProgressExpiresAt
	require.NoError(t, store.Update(ctx, &c))

	for _, size := range []int{0, 1, 5, 12} {
		var got []string
		require.NoError(t, store.ListStuck(ctx, now, size, func(recs []*persistence.Record) error {
			for _, r := range recs {
				require.Equal(t, persistence.StatusInProgress, r.Status)
				got = append(got, r.Key)
			}
			return nil
		}))
		slices.Sort(got) // the order within one in-progress expiry is the keys'
		require.Equal(t, want, got, "page size %d", size)
	}
}

func TestSweep(t *testing.T) {
	pool, store := setup(t)
	ctx := t.Context()
	now := testNow()
	put := func(key string, expires, inProgressExpires time.Time, complete bool) {
		rec := recordtest.InProgress(key, now.Add(-time.Hour))
		rec.ExpiresAt, rec.InProgressExpiresAt = expires, inProgressExpires
		require.NoError(t, store.Put(ctx, rec, now.Add(-time.Hour)))
		if complete {
			done := completed(rec, `1`)
			done.ExpiresAt = expires
			require.NoError(t, store.Update(ctx, done))
		}
	}
	live := recordtest.Sweep(t, now, put, func(limit int) (int64, error) { return store.Sweep(ctx, now, limit) })
	require.Equal(t, live, listAll(t, store, "", 0))

	// Rows another transaction holds are skipped, not waited for.
	put("expired#held", now.Add(-time.Second), time.Time{}, true)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT FROM idempotency WHERE id = 'expired#held' FOR SHARE`)
	require.NoError(t, err)
	n, err := store.Sweep(ctx, now, 10)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, tx.Rollback(ctx))
	n, err = store.Sweep(ctx, now, 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
