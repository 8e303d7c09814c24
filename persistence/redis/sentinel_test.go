package redis_test

import (
	"crypto/rand"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// TestSentinelFailover reserves a key, stops the primary so that Sentinel
// fails over to its replica, and completes the reservation on the new
// primary through a Sentinel-aware client. The new primary has never run the store's
// scripts (NOSCRIPT): go-redis sends them again with EVAL.
func TestSentinelFailover(t *testing.T) {
	primary := redisserver.Start(t)
	replica := redisserver.StartReplica(t, primary)
	sentinel := redisserver.StartSentinel(t, primary)
	ctx := t.Context()
	now := testNow()

	client := failoverClient(t, sentinel)
	rt := countRoundTrips(t, client)
	store := newStore(t, client)

	rec := recordtest.InProgress("failover#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, rec, now))
	replicaClient := replica.NewClient()
	require.Eventually(t, func() bool {
		token, err := replicaClient.HGet(ctx, rec.Key, tokenField).Result()
		return err == nil && token == rec.Token
	}, 30*time.Second, 10*time.Millisecond, "the record did not reach the replica")

	// The primary crashes; Sentinel promotes the replica.
	primary.Stop()
	awaitPromotion(t, sentinel, replica)

	rt.reset()
	done := completed(rec, `{"id":"p_1"}`)
	require.NoError(t, store.Update(ctx, done))
	rt.requireScripts(t, "Update on the new primary", "evalsha", "eval")

	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, done, got)
	onNewPrimary, err := replicaClient.HGet(ctx, rec.Key, "status").Result()
	require.NoError(t, err)
	require.Equal(t, string(persistence.StatusCompleted), onNewPrimary)

	var conflict *persistence.ConflictError
	require.ErrorAs(t, store.Put(ctx, recordtest.InProgress(rec.Key, now), now), &conflict)
	requireRecord(t, done, conflict.Existing)
}

// TestSentinelFailoverWaitReplicas reserves a key with WaitReplicas set to
// both replicas, stops the primary at once (without waiting for
// replication, as a crash would), and finds the reservation on the replica
// Sentinel promotes. The new primary has one replica left: a store that
// waits for two fails its writes with ErrNotReplicated, one that waits for
// one goes on once Sentinel has pointed the other replica at it.
func TestSentinelFailoverWaitReplicas(t *testing.T) {
	primary := redisserver.Start(t)
	replicas := []*redisserver.Server{redisserver.StartReplica(t, primary), redisserver.StartReplica(t, primary)}
	sentinel := redisserver.StartSentinel(t, primary)
	ctx := t.Context()
	now := testNow()

	client := failoverClient(t, sentinel)
	both := newStore(t, client, withWait(2, 0))
	one := newStore(t, client, withWait(1, 4*time.Second))

	rec := recordtest.InProgress("failover-wait#"+rand.Text(), now)
	require.NoError(t, both.Put(ctx, rec, now))
	primary.Stop()

	promoted := awaitPromotion(t, sentinel, replicas...)

	token, err := promoted.NewClient().HGet(ctx, rec.Key, tokenField).Result()
	require.NoError(t, err, "the acknowledged reservation was lost in the failover")
	require.Equal(t, rec.Token, token)
	got, err := both.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, rec, got)

	done := completed(rec, `{"id":"p_1"}`)
	require.ErrorIs(t, both.Update(ctx, done), redisstore.ErrNotReplicated)
	require.Eventually(t, func() bool {
		return one.Update(ctx, done) == nil
	}, 60*time.Second, 100*time.Millisecond, "the remaining replica did not follow the new primary")
}

// failoverClient returns a client that follows the primary that sentinel
// names.
func failoverClient(t *testing.T, sentinel *redisserver.Server) *redis.Client {
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redisserver.SentinelMaster,
		SentinelAddrs: []string{sentinel.Addr},
	})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// awaitPromotion waits until sentinel names one of candidates as the
// primary and that server has taken the role, and returns it.
func awaitPromotion(t *testing.T, sentinel *redisserver.Server, candidates ...*redisserver.Server) *redisserver.Server {
	ctx := t.Context()
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	t.Cleanup(func() { _ = sc.Close() })
	clients := make([]*redis.Client, len(candidates))
	for i, c := range candidates {
		clients[i] = c.NewClient()
	}
	var promoted *redisserver.Server
	require.Eventually(t, func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, redisserver.SentinelMaster).Result()
		if err != nil {
			return false
		}
		for i, c := range candidates {
			if net.JoinHostPort(addr[0], addr[1]) == c.Addr {
				role, err := clients[i].Do(ctx, "ROLE").Slice()
				if err == nil && role[0] == "master" {
					promoted = c
					return true
				}
			}
		}
		return false
	}, 60*time.Second, 10*time.Millisecond, "Sentinel did not promote a replica")
	return promoted
}
