package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

// TestCluster runs the store through a cluster client that sends read-only
// commands to replicas (ReadOnly, RouteRandomly).
func TestCluster(t *testing.T) {
	cluster := redisserver.StartCluster(t, 1)
	client := cluster.NewClient(func(o *redis.ClusterOptions) {
		o.ReadOnly = true
		o.RouteRandomly = true
	})
	store := newStore(t, client, withPrefix("idempotency:"))
	storetest.Run(t, func(*testing.T) persistence.Store { return store })
}

// nodeCommands records which node each command went to.
type nodeCommands struct {
	mu   sync.Mutex
	seen map[string][]string // command name -> node addresses
}

func (n *nodeCommands) hook(addr string) redis.Hook { return nodeHook{n, addr} }

func (n *nodeCommands) nodes(cmd string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen[cmd]
}

type nodeHook struct {
	n    *nodeCommands
	addr string
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.mu.Lock()
		h.n.seen[cmd.Name()] = append(h.n.seen[cmd.Name()], h.addr)
		h.n.mu.Unlock()
		return next(ctx, cmd)
	}
}

// TestClusterReadsGoToThePrimary checks that the store's operations, reads
// included, go to the primary when the cluster client sends read-only
// commands to replicas, while a plain HGETALL through the same client goes
// to the replica.
func TestClusterReadsGoToThePrimary(t *testing.T) {
	cluster := redisserver.StartCluster(t, 1)
	client := cluster.NewClient(func(o *redis.ClusterOptions) { o.ReadOnly = true })
	seen := &nodeCommands{seen: make(map[string][]string)}
	client.OnNewNode(func(node *redis.Client) { node.AddHook(seen.hook(node.Options().Addr)) })
	store := newStore(t, client)
	ctx := t.Context()
	now := testNow()

	for i := range 10 {
		rec := recordtest.InProgress(fmt.Sprintf("cluster-%d#%s", i, rand.Text()), now)
		require.NoError(t, store.Put(ctx, rec, now))
		got, err := store.Get(ctx, rec.Key)
		require.NoError(t, err)
		requireRecord(t, rec, got)
		done := completed(rec, `"ok"`)
		require.NoError(t, store.Update(ctx, done))
		var conflict *persistence.ConflictError
		require.ErrorAs(t, store.Put(ctx, recordtest.InProgress(rec.Key, now), now), &conflict)
		requireRecord(t, done, conflict.Existing)
		require.ErrorIs(t, store.Delete(ctx, rec.Key, rec.Token), persistence.ErrFenced, "a release must not delete a result")

		// The control: read-only commands do go to the replica.
		require.NoError(t, client.HGetAll(ctx, rec.Key).Err())
	}

	scripts := append(seen.nodes("evalsha"), seen.nodes("eval")...)
	require.Len(t, seen.nodes("evalsha"), 10*5)
	for _, addr := range scripts {
		require.Equal(t, cluster.Primary.Addr, addr, "a script went to a replica")
	}
	require.Len(t, seen.nodes("hgetall"), 10)
	for _, addr := range seen.nodes("hgetall") {
		require.Equal(t, cluster.Replicas[0].Addr, addr, "the control HGETALL went to the primary")
	}
}
