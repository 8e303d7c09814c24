package dynamodb_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
)

// Sweep deletes the records expired at now, limit at a time, and keeps
// the others: live ones, and those in progress past their in-progress
// expiry but not their expiry, which their invocation may still complete.
func TestSweep(t *testing.T) {
	for _, layout := range layouts {
		t.Run(layout.name, func(t *testing.T) {
			eachServer(t, func(t *testing.T, srv server) {
				_, store, counter := srv.setup(t, layout.optFns...)
				ctx := t.Context()
				now := wholeSecond()
				put := func(key string, expires, inProgressExpires time.Time, complete bool) {
					rec := inProgress(now.Add(-2 * time.Hour))
					rec.Key = key
					rec.ExpiresAt, rec.InProgressExpiresAt = expires, inProgressExpires
					require.NoError(t, store.Put(ctx, rec, now.Add(-2*time.Hour)))
					if complete {
						done := completed(rec, []byte(`1`))
						done.InProgressExpiresAt = time.Time{}
						require.NoError(t, store.Update(ctx, done))
					}
				}
				live := recordtest.Sweep(t, now, put, func(limit int) (int64, error) { return store.Sweep(ctx, now, limit) })
				require.Equal(t, 6, counter.Calls("DeleteItem"), "one delete per expired record")
				keys, _, _ := listed(t, store, "", 0)
				require.Equal(t, live, keys)
			})
		})
	}
}

// sweepRace is a client that runs takeOver once, after the first page
// of expired records is read and before any is deleted.
type sweepRace struct {
	*awsdynamodb.Client
	takeOver func()
}

func (c *sweepRace) Scan(ctx context.Context, in *awsdynamodb.ScanInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.ScanOutput, error) {
	out, err := c.Client.Scan(ctx, in, optFns...)
	if c.takeOver != nil {
		c.takeOver()
		c.takeOver = nil
	}
	return out, err
}

// A record read as expired but taken over before its delete is kept, and
// not counted: the delete is conditioned on the record's being expired
// still.
func TestSweepKeepsARecordTakenOver(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		ctx := t.Context()
		now := wholeSecond()
		old := inProgress(now.Add(-2 * time.Hour))
		old.ExpiresAt = now.Add(-time.Second)
		require.NoError(t, healthy.Put(ctx, old, now.Add(-2*time.Hour)))

		renewed := inProgress(now)
		renewed.Key = old.Key
		client := &sweepRace{Client: srv.NewClient(), takeOver: func() {
			require.NoError(t, healthy.Put(ctx, renewed, now), "a takeover of the expired record")
		}}
		store := newStore(t, client, name)
		n, err := store.Sweep(ctx, now, 10)
		require.NoError(t, err)
		require.Zero(t, n)
		got, err := healthy.Get(ctx, old.Key)
		require.NoError(t, err)
		require.Equal(t, renewed.Token, got.Token)
	})
}

// Sweep's deletes are retried after a ReplicatedWriteConflictException, as
// the store's other writes are.
func TestSweepRetriesReplicatedWriteConflicts(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		now := wholeSecond()
		rec := inProgress(now.Add(-2 * time.Hour))
		rec.ExpiresAt = now.Add(-time.Second)
		require.NoError(t, healthy.Put(t.Context(), rec, now.Add(-2*time.Hour)))

		store, faults, counter := srv.conflictStore(t, name)
		faults.AnswerError("DeleteItem", http.StatusBadRequest, conflictCode, 2)
		n, err := store.Sweep(t.Context(), now, 10)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.Equal(t, 3, counter.Attempts("DeleteItem"))
		_, err = healthy.Get(t.Context(), rec.Key)
		require.ErrorIs(t, err, persistence.ErrNotFound)
	})
}

func TestSweepNeedsQueryAndScan(t *testing.T) {
	store := newStore(t, &requestClient{}, "idempotency")
	_, err := store.Sweep(t.Context(), time.Now(), 10)
	require.ErrorContains(t, err, "cannot Query and Scan")
}
