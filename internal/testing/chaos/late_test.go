package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// A lease renewal held back in the network until after its call completed,
// then applied, must change nothing (docs/protocol.md: a renewal of the
// caller's own completed record is refused). Applied, it would make the
// completed record in progress again; once that in-progress expiry passed,
// a retry would take the key over and run the handler a second time. The
// scenario runs end to end on each store, with the renewal held at the
// store interface (faultstore.ApplyLate) and, for DynamoDB, as an HTTP
// attempt that the SDK retries and that reaches the server after the
// completion (dynalite.ForwardedLate), as a proxy holding it would do.
func TestLateRenewalLeavesTheKeyCompleted(t *testing.T) {
	t.Parallel()
	t.Run("memory/store", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			store, held := heldAtStore(t, memory.New())
			lateRenewal(t, store, held)
		})
	})
	t.Run("redis/store", func(t *testing.T) {
		t.Parallel()
		srv := redisserver.Start(t)
		inner, err := redisstore.New(srv.NewClient())
		require.NoError(t, err)
		store, held := heldAtStore(t, inner)
		lateRenewal(t, store, held)
	})
	for _, kind := range []*dynamotest.Kind{dynamotest.DynamoDBLocal, dynamotest.Dynalite} {
		t.Run(kind.Name, func(t *testing.T) {
			t.Parallel()
			srv := kind.Start(t)
			newStore := func(t *testing.T, optFns ...func(*awsdynamodb.Options)) persistence.Store {
				table := dynalite.TableName(t)
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				require.NoError(t, dynamodb.CreateTable(ctx, srv.NewClient(), table))
				store, err := dynamodb.New(srv.NewClient(optFns...), table)
				require.NoError(t, err)
				return store
			}
			t.Run("store", func(t *testing.T) {
				store, held := heldAtStore(t, newStore(t))
				lateRenewal(t, store, held)
			})
			t.Run("http", func(t *testing.T) {
				faults := &dynalite.Faults{}
				faults.Add("UpdateItem", dynalite.ForwardedLate, 1) // the first renewal's first attempt
				held := make(chan func(context.Context) error, 1)
				faults.OnHold = func(_ context.Context, h *dynalite.HeldRequest) { held <- h.Forward }
				lateRenewal(t, newStore(t, faults.Register), held)
			})
		})
	}
}

// heldAtStore returns store, whose first Update (the first renewal) is
// held back, and the channel on which the function that applies it comes.
func heldAtStore(t *testing.T, store persistence.Store) (persistence.Store, <-chan func(context.Context) error) {
	s := faultstore.New(store)
	s.Fault = faultstore.On(faultstore.OpUpdate, 1, faultstore.ApplyLate)
	held := make(chan func(context.Context) error, 1)
	s.OnHold = func(_ context.Context, h *faultstore.Held) {
		assert.Equal(t, persistence.StatusInProgress, h.Record.Status, "the write held back is a renewal")
		held <- h.Apply
	}
	return s, held
}

// lateRenewal runs the scenario over store, whose first renewal is held
// back: the function that applies it comes on held.
func lateRenewal(t *testing.T, store persistence.Store, held <-chan func(context.Context) error) {
	// Long enough that a reservation's reply comes within it on a loaded
	// machine: one that came later would not run (the scenario needs it
	// to). DynamoDB Local was seen to answer after 2 seconds on two busy
	// cores; 8 seconds cost the scenario about 13 seconds, with the
	// stores' runs in parallel.
	const lease = 8 * time.Second
	type order struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	var (
		runs   atomic.Int32
		key    string
		apply  func(context.Context) error
		heldAt time.Time
	)
	charge := func(ctx context.Context, o order) (string, error) {
		n := runs.Add(1)
		key, _ = idempotency.KeyFromContext(ctx)
		if n == 1 {
			// The first run lasts until its first renewal was sent and held
			// back; it completes before that renewal reaches the store.
			apply = <-held
			heldAt = time.Now()
		}
		return fmt.Sprintf("charge %d for %s", n, o.ID), nil
	}
	wrapped, err := idempotency.Wrap(charge, store, idempotency.WithKey("id"), idempotency.WithLease(lease),
		idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	ctx := t.Context()
	o := order{ID: "order-1", Amount: 42}

	first, err := wrapped(ctx, o)
	require.NoError(t, err)
	rec, err := store.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, persistence.StatusCompleted, rec.Status, "the call completed its key")

	// The renewal reaches the store now, after the completion.
	late := apply(ctx)
	t.Logf("the renewal applied after the completion returned %v", late)
	rec, err = store.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, persistence.StatusCompleted, rec.Status,
		"the renewal made the completed record in progress again, until %s", rec.InProgressExpiresAt.Format(time.StampMilli))

	// A retry after the in-progress expiry that the renewal carried (a
	// lease from when it was sent, before heldAt; stores keep it to the
	// millisecond, rounded up).
	time.Sleep(time.Until(heldAt.Add(lease + 2*time.Millisecond)))
	again, err := wrapped(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, first, again, "the retry gets the stored result")
	assert.EqualValues(t, 1, runs.Load(), "the handler ran again after the late renewal: a second side effect")
}
