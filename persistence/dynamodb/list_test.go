package dynamodb_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// listed returns the keys of the records List finds, and the number of
// pages it read.
func listed(t *testing.T, store *dynamodb.Store, prefix string, pageSize int) (keys []string, pages int, recs map[string]*persistence.Record) {
	t.Helper()
	recs = map[string]*persistence.Record{}
	err := store.List(t.Context(), prefix, pageSize, func(page []*persistence.Record) error {
		pages++
		for _, rec := range page {
			keys = append(keys, rec.Key)
			recs[rec.Key] = rec
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(keys)
	return keys, pages, recs
}

func TestList(t *testing.T) {
	for _, layout := range layouts {
		t.Run(layout.name, func(t *testing.T) {
			eachServer(t, func(t *testing.T, srv server) {
				_, store, _ := srv.setup(t, layout.optFns...)
				now := time.Now().Truncate(time.Second)
				var want []string
				for i, key := range []string{"orders#1", "orders#2", "orders#3", "refunds#1", "refunds#2"} {
					rec := inProgress(now)
					rec.Key = key
					rec.Token = "token-" + key
					require.NoError(t, store.Put(t.Context(), rec, now))
					if i%2 == 0 {
						done := *rec
						done.Status, done.Response = persistence.StatusCompleted, []byte(`{"receipt":1}`)
						done.InProgressExpiresAt = time.Time{}
						require.NoError(t, store.Update(t.Context(), &done))
					}
					want = append(want, key)
				}

				keys, pages, recs := listed(t, store, "", 2)
				require.Equal(t, want, keys)
				require.GreaterOrEqual(t, pages, 3, "pages of 2 items")
				orders1 := recs["orders#1"]
				require.Equal(t, persistence.StatusCompleted, orders1.Status)
				require.Equal(t, "token-orders#1", orders1.Token)
				require.Equal(t, now.Add(time.Hour).Unix(), orders1.ExpiresAt.Unix())
				require.Nil(t, orders1.Response, "List leaves responses out")
				require.Equal(t, persistence.StatusInProgress, recs["orders#2"].Status)
				require.Equal(t, now.Add(30*time.Second), recs["orders#2"].InProgressExpiresAt)

				keys, _, _ = listed(t, store, "refunds#", 0)
				require.Equal(t, []string{"refunds#1", "refunds#2"}, keys)

				stop := errors.New("stop")
				err := store.List(t.Context(), "", 1, func([]*persistence.Record) error { return stop })
				require.ErrorIs(t, err, stop)
			})
		})
	}
}

func TestDeleteRecord(t *testing.T) { eachServer(t, testDeleteRecord) }

func testDeleteRecord(t *testing.T, srv server) {
	_, store, _ := srv.setup(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	rec := inProgress(now)
	require.NoError(t, store.Put(ctx, rec, now))
	seen, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)

	// It completes with the same token: the record the operator saw is
	// gone, and a delete conditioned on the token alone would remove
	// the completion.
	done := *rec
	done.Status, done.InProgressExpiresAt, done.Response = persistence.StatusCompleted, time.Time{}, []byte(`"ok"`)
	require.NoError(t, store.Update(ctx, &done))
	require.ErrorIs(t, store.DeleteRecord(ctx, seen), persistence.ErrChanged)
	_, err = store.Get(ctx, rec.Key)
	require.NoError(t, err, "the completed record is kept")

	completed, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	renewed := *completed
	renewed.ExpiresAt = renewed.ExpiresAt.Add(time.Second)
	require.ErrorIs(t, store.DeleteRecord(ctx, &renewed), persistence.ErrChanged, "another expiry")
	require.NoError(t, store.DeleteRecord(ctx, completed))
	require.ErrorIs(t, store.DeleteRecord(ctx, completed), persistence.ErrNotFound)
	_, err = store.Get(ctx, rec.Key)
	require.ErrorIs(t, err, persistence.ErrNotFound)

	// An in-progress record is deleted with its in-progress expiry.
	rec = inProgress(now)
	require.NoError(t, store.Put(ctx, rec, now))
	seen, err = store.Get(ctx, rec.Key)
	require.NoError(t, err)
	lease := *seen
	lease.InProgressExpiresAt = lease.InProgressExpiresAt.Add(time.Second)
	require.ErrorIs(t, store.DeleteRecord(ctx, &lease), persistence.ErrChanged, "a renewed lease")
	require.NoError(t, store.DeleteRecord(ctx, seen))
}

func TestCheckTable(t *testing.T) { eachServer(t, testCheckTable) }

func testCheckTable(t *testing.T, srv server) {
	name, _, _ := srv.setup(t)
	client := srv.NewClient()
	require.NoError(t, dynamodb.CheckTable(t.Context(), client, name))

	err := dynamodb.CheckTable(t.Context(), client, name, func(o *dynamodb.Options) { o.SortKeyAttr = "sk" })
	require.ErrorContains(t, err, "exists with key schema [id HASH], the options describe [id HASH][sk RANGE]")
	require.ErrorIs(t, err, dynamodb.ErrKeySchema)

	err = dynamodb.CheckTable(context.Background(), client, name+"-missing")
	var missing *types.ResourceNotFoundException
	require.ErrorAs(t, err, &missing)
}
