package redis_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

// These tests run the store with Options.WaitReplicas against a primary and
// a replica. Freezing the replica (SIGSTOP) stops its acknowledgements, so
// a write that waits for it must fail, and one that does not would pass.

func withWait(replicas int, timeout time.Duration) func(*redisstore.Options) {
	return func(o *redisstore.Options) {
		o.WaitReplicas = replicas
		o.WaitTimeout = timeout
	}
}

func TestWaitReplicasConformance(t *testing.T) {
	primary := redisserver.Start(t)
	redisserver.StartReplica(t, primary)
	store := newStore(t, primary.NewClient(), withWait(1, 0))
	storetest.Run(t, func(*testing.T) persistence.Store { return store })
}

// TestWaitReplicas checks that each write, with its WAIT, is one request,
// and that the replica holds what the write wrote as soon as it returns.
func TestWaitReplicas(t *testing.T) {
	primary := redisserver.Start(t)
	replica := redisserver.StartReplica(t, primary)
	client := primary.NewClient()
	rt := countRoundTrips(t, client)
	store := newStore(t, client, withWait(1, 0))
	onReplica := replica.NewClient()
	ctx := t.Context()
	now := testNow()

	// The first run of each script loads it (NOSCRIPT, then EVAL).
	warm := recordtest.InProgress("warm#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, warm, now))
	require.NoError(t, store.Delete(ctx, warm.Key, warm.Token))
	require.NoError(t, store.Put(ctx, warm, now))
	require.NoError(t, store.Update(ctx, completed(warm, `"ok"`)))
	rt.reset()
	rec := recordtest.InProgress("wait#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, rec, now))
	rt.require(t, "Put", "pipeline")
	token, err := onReplica.HGet(ctx, rec.Key, tokenField).Result()
	require.NoError(t, err)
	require.Equal(t, rec.Token, token)

	rt.reset()
	done := completed(rec, `{"id":"p_1"}`)
	require.NoError(t, store.Update(ctx, done))
	rt.require(t, "Update", "pipeline")
	status, err := onReplica.HGet(ctx, rec.Key, "status").Result()
	require.NoError(t, err)
	require.Equal(t, string(persistence.StatusCompleted), status)

	// A conflict writes nothing; it is answered as without WaitReplicas.
	var conflict *persistence.ConflictError
	require.ErrorAs(t, store.Put(ctx, recordtest.InProgress(rec.Key, now), now), &conflict)
	requireRecord(t, done, conflict.Existing)

	// A release applies to a reservation only.
	held := recordtest.InProgress("wait#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, held, now))
	rt.reset()
	require.NoError(t, store.Delete(ctx, held.Key, held.Token))
	rt.require(t, "Delete", "pipeline")
	require.ErrorIs(t, onReplica.HGet(ctx, held.Key, tokenField).Err(), redis.Nil)
}

// TestWaitReplicasUnacknowledged freezes the replica: every write is
// applied on the primary and fails with ErrNotReplicated.
func TestWaitReplicasUnacknowledged(t *testing.T) {
	primary := redisserver.Start(t)
	replica := redisserver.StartReplica(t, primary)
	client := primary.NewClient()
	store := newStore(t, client, withWait(1, 100*time.Millisecond))
	ctx := t.Context()
	now := testNow()
	rec := recordtest.InProgress("unacknowledged#"+rand.Text(), now)

	replica.Freeze()
	err := store.Put(ctx, rec, now)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	require.ErrorContains(t, err, `put "`+rec.Key+`": applied on the primary, but acknowledged by 0 of 1 replicas`)
	token, err := client.HGet(ctx, rec.Key, tokenField).Result()
	require.NoError(t, err)
	require.Equal(t, rec.Token, token, "the reservation is not on the primary")

	// The same Put again on another connection, as go-redis retries one
	// whose reply was lost: it finds its own reservation, which is not
	// replicated either.
	retried := newStore(t, primary.NewClient(), withWait(1, 100*time.Millisecond))
	require.ErrorIs(t, retried.Put(ctx, rec, now), redisstore.ErrNotReplicated)
	require.ErrorIs(t, store.Delete(ctx, rec.Key, rec.Token), redisstore.ErrNotReplicated)
	// Nothing to delete, nothing to wait for.
	require.NoError(t, store.Delete(ctx, rec.Key, rec.Token))
	require.ErrorIs(t, store.Put(ctx, rec, now), redisstore.ErrNotReplicated)
	require.ErrorIs(t, store.Update(ctx, completed(rec, `"ok"`)), redisstore.ErrNotReplicated)
	// A completion sent again finds its own: done, and waited for, since
	// the first may not be replicated either.
	require.ErrorIs(t, store.Update(ctx, completed(rec, `"ok"`)), redisstore.ErrNotReplicated)
	replica.Thaw()

	// Once the replica has caught up, writes are acknowledged again, and a
	// repeated Put finds its own replicated reservation.
	patient := newStore(t, client, withWait(1, 4*time.Second))
	again := recordtest.InProgress("acknowledged#"+rand.Text(), now)
	require.NoError(t, patient.Put(ctx, again, now))
	var conflict *persistence.ConflictError
	require.ErrorAs(t, patient.Put(ctx, again, now), &conflict)
	require.Equal(t, again.Token, conflict.Existing.Token)
}

// TestWaitReplicasWrap runs a handler over a store whose replica has
// stopped: the reservation is not replicated, so the handler does not run,
// and the caller gets a StoreError it can retry.
func TestWaitReplicasWrap(t *testing.T) {
	primary := redisserver.Start(t)
	replica := redisserver.StartReplica(t, primary)
	client := primary.NewClient()
	c := &charger{}
	h := wrap(t, c, newStore(t, client, withWait(1, 100*time.Millisecond)))
	o := newOrder()

	replica.Freeze()
	_, err := h(t.Context(), o)
	var storeErr *idempotency.StoreError
	require.ErrorAs(t, err, &storeErr)
	require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	require.EqualValues(t, 0, c.runs.Load())
	replica.Thaw()

	// The same keys, with time for the replica to catch up.
	h = wrap(t, c, newStore(t, client, withWait(1, 4*time.Second)))
	first, err := h(t.Context(), o)
	require.NoError(t, err)
	again, err := h(t.Context(), o)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.EqualValues(t, 1, c.runs.Load())
}

// TestWaitReplicasScriptFlush sends the scripts' text again, with WAIT,
// after the server has lost its script cache.
func TestWaitReplicasScriptFlush(t *testing.T) {
	primary := redisserver.Start(t)
	replica := redisserver.StartReplica(t, primary)
	client := primary.NewClient()
	store := newStore(t, client, withWait(1, 0))
	ctx := t.Context()
	now := testNow()

	require.NoError(t, store.Put(ctx, recordtest.InProgress("warm#"+rand.Text(), now), now))
	require.NoError(t, client.ScriptFlush(ctx).Err())
	rec := recordtest.InProgress("flushed#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, rec, now))
	token, err := replica.NewClient().HGet(ctx, rec.Key, tokenField).Result()
	require.NoError(t, err)
	require.Equal(t, rec.Token, token)
}

// waitArgs records the arguments of the WAIT commands a client sends.
type waitArgs struct {
	mu   sync.Mutex
	args [][]any
}

func (w *waitArgs) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (w *waitArgs) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (w *waitArgs) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		w.mu.Lock()
		for _, c := range cmds {
			if c.Name() == "wait" {
				w.args = append(w.args, c.Args())
			}
		}
		w.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (w *waitArgs) last() []any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.args[len(w.args)-1]
}

// TestWaitTimeoutFollowsTheDeadline checks the WAIT sent: its timeout is
// WaitTimeout, or less when the context's deadline comes sooner.
func TestWaitTimeoutFollowsTheDeadline(t *testing.T) {
	primary := redisserver.Start(t)
	redisserver.StartReplica(t, primary)
	client := primary.NewClient()
	seen := &waitArgs{}
	client.AddHook(seen)
	store := newStore(t, client, withWait(1, 2*time.Second))
	now := testNow()

	require.NoError(t, store.Put(t.Context(), recordtest.InProgress("timeout#"+rand.Text(), now), now))
	require.Equal(t, []any{"wait", 1, int64(2000)}, seen.last())

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	require.NoError(t, store.Put(ctx, recordtest.InProgress("deadline#"+rand.Text(), now), now))
	args := seen.last()
	require.Equal(t, []any{"wait", 1}, args[:2])
	ms := args[2].(int64)
	require.True(t, ms >= 1 && ms <= 300, "WAIT timeout %d ms, want at most the 300 ms left", ms)
}

// TestWaitReplicasCluster sends the script and WAIT to the primary that
// owns the key, on one connection, through a cluster client that routes
// read-only commands to replicas.
func TestWaitReplicasCluster(t *testing.T) {
	cluster := redisserver.StartCluster(t, 1)
	client := cluster.NewClient(func(o *redis.ClusterOptions) {
		o.ReadOnly = true
		o.RouteRandomly = true
	})
	t.Run("conformance", func(t *testing.T) {
		store := newStore(t, client, withPrefix("idempotency:"), withWait(1, 0))
		storetest.Run(t, func(*testing.T) persistence.Store { return store })
	})
	t.Run("unacknowledged", func(t *testing.T) {
		// The write and WAIT must reach the key's primary: a replica
		// refuses WAIT, and the cluster client sends a pipeline's keyless
		// commands to a node of its choosing.
		store := newStore(t, client, withWait(1, 100*time.Millisecond))
		now := testNow()
		cluster.Replicas[0].Freeze()
		defer cluster.Replicas[0].Thaw()
		err := store.Put(t.Context(), recordtest.InProgress("cluster-wait#"+rand.Text(), now), now)
		require.ErrorIs(t, err, redisstore.ErrNotReplicated)
	})
}

// unused returns c, closed when the test ends (a ring runs a heartbeat
// goroutine until then). It is never connected to.
func unused[C interface{ Close() error }](t *testing.T, c C) C {
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestWaitReplicasValidates(t *testing.T) {
	client := unused(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second}))

	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		opts   func(*redisstore.Options)
		want   string
	}{
		{"negative replicas", client, withWait(-1, 0), "negative WaitReplicas -1"},
		{"negative timeout", client, withWait(1, -time.Second), "negative WaitTimeout"},
		{"timeout not under ReadTimeout", client, withWait(1, time.Second), "WaitTimeout 1s is not shorter than the client's ReadTimeout 1s"},
		{"default timeout not under ReadTimeout", unused(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})), withWait(1, 0), "WaitTimeout 1s"},
		{"a ring", unused(t, redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})), withWait(1, 0), "needs a *redis.Client or a *redis.ClusterClient, not a *redis.Ring"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisstore.New(tc.client, tc.opts)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// A ring without waiting, and a client without a read timeout, are fine.
	_, err := redisstore.New(unused(t, redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})))
	require.NoError(t, err)
	_, err = redisstore.New(unused(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -1})), withWait(1, time.Minute))
	require.NoError(t, err)
	_, err = redisstore.New(client, withWait(1, 999*time.Millisecond))
	require.NoError(t, err)
}
