package redis_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/internal/testing/waittest"
	"github.com/retrysafe/retrysafe/persistence"
)

// reservation returns an in-progress record of a fresh key.
func reservation() *persistence.Record {
	now := testNow()
	return &persistence.Record{
		Key:                 "orders#" + rand.Text(),
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour),
		InProgressExpiresAt: now.Add(time.Minute),
		Token:               rand.Text(),
	}
}

// A watch in one process is woken by a completion, a release or an
// operator's release in another. A completion's wake-up carries the
// record as Get reads it; a release's carries none.
func TestWatchWakesOnEveryEnd(t *testing.T) {
	srv := redisserver.Start(t)
	here, there := newStore(t, srv.NewClient()), newStore(t, srv.NewClient())
	ctx := t.Context()
	for _, end := range []struct {
		name      string
		do        func(rec *persistence.Record) error
		completes bool
	}{
		{"completion", func(rec *persistence.Record) error {
			done := *rec
			done.Status, done.Response = persistence.StatusCompleted, []byte(`{}`)
			return here.Update(ctx, &done)
		}, true},
		{"release", func(rec *persistence.Record) error { return here.Delete(ctx, rec.Key, rec.Token) }, false},
		{"operator's release", func(rec *persistence.Record) error { return here.DeleteRecord(ctx, rec) }, false},
	} {
		t.Run(end.name, func(t *testing.T) {
			rec := reservation()
			require.NoError(t, here.Put(ctx, rec, testNow()))
			woken := waittest.Watch(t, there, rec.Key)
			require.NoError(t, end.do(rec))
			waittest.RequireWakeUp(t, woken, here, rec.Key, end.completes)
		})
	}
}

// A dropped subscription connection wakes its watches once go-redis has
// subscribed again: a message may have been lost meanwhile.
func TestWatchWakesAfterItsConnectionDrops(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	woken := waittest.Watch(t, store, reservation().Key)
	admin := srv.NewClient()
	require.NoError(t, admin.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Err())
	<-woken
}

// On a cluster, a completion on the key's primary wakes a watch.
func TestWatchOnCluster(t *testing.T) {
	cluster := redisserver.StartCluster(t, 0)
	here := newStore(t, cluster.NewClient(), withPrefix("idempotency:"))
	there := newStore(t, cluster.NewClient(), withPrefix("idempotency:"))
	ctx := t.Context()
	rec := reservation()
	require.NoError(t, here.Put(ctx, rec, testNow()))
	woken := waittest.Watch(t, there, rec.Key)
	require.NoError(t, here.Delete(ctx, rec.Key, rec.Token))
	<-woken
}

// Watches of one key in a process share a subscription, and so do watches
// of several keys: one connection, closed after the last.
func TestWatchesShareOneConnection(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	admin := srv.NewClient()
	ctx := t.Context()
	pubsubClients := func() int {
		list, err := admin.ClientList(ctx).Result()
		require.NoError(t, err)
		return bytes.Count([]byte(list), []byte("flags=P"))
	}
	rec := reservation()
	var stops []func()
	for _, key := range []string{rec.Key, rec.Key, reservation().Key} {
		_, stop, err := store.Watch(ctx, key)
		require.NoError(t, err)
		stops = append(stops, stop)
	}
	assert.Equal(t, 1, pubsubClients())
	n, err := admin.PubSubNumSub(ctx, rec.Key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n[rec.Key], "one subscription for two watches of a key")
	for _, stop := range stops {
		stop()
	}
}

// newWaiters returns a waiting process on each client.
func newWaiters(t *testing.T, clients ...redis.UniversalClient) []*waittest.Waiter {
	var waiters []*waittest.Waiter
	for _, c := range clients {
		waiters = append(waiters, waittest.NewWaiter(t, newStore(t, c)))
	}
	return waiters
}

// Waiters in other processes are woken by the holder's completion.
func TestWaitersAreWokenAcrossProcesses(t *testing.T) {
	srv := redisserver.Start(t)
	waiters := newWaiters(t, srv.NewClient(), srv.NewClient())
	waittest.HoldAndWait(t, newStore(t, srv.NewClient()), waiters, func() { time.Sleep(waittest.Hold) })
	waittest.RequireWoken(t, waiters)
}

// A waiter woken by a release takes its turn: it reserves the key, runs,
// and wakes the other waiter with its result.
func TestWaitersTakeTheirTurnAfterARelease(t *testing.T) {
	srv := redisserver.Start(t)
	waittest.ReleaseAndWait(t, newStore(t, srv.NewClient()), newWaiters(t, srv.NewClient(), srv.NewClient()))
}

// A result too large for a message wakes its waiters, who read it.
func TestWaitersReadALargeResult(t *testing.T) {
	srv := redisserver.Start(t)
	waiters := newWaiters(t, srv.NewClient(), srv.NewClient())
	waittest.HoldLargeAndWait(t, newStore(t, srv.NewClient()), waiters, 100<<10, func() { time.Sleep(waittest.Hold) })
	waittest.RequireWokenToRead(t, waiters)
}

// Waiters whose subscription connection, or every connection, is killed
// while they wait still get the holder's result.
func TestWaitersSurviveKilledConnections(t *testing.T) {
	for _, kill := range []string{"pubsub", "normal"} {
		t.Run(kill, func(t *testing.T) {
			srv := redisserver.Start(t)
			admin := srv.NewClient()
			waittest.HoldAndWait(t, newStore(t, srv.NewClient()), newWaiters(t, srv.NewClient(), srv.NewClient()), func() {
				require.NoError(t, admin.ClientKillByFilter(t.Context(), "TYPE", kill).Err())
			})
		})
	}
}

// Waiters whose messages are lost, on a connection that stays up, get the
// holder's result from their next poll.
func TestWaitersSurviveLostMessages(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := startMessageDropper(t, srv.Addr)
	waiters := newWaiters(t, redis.NewClient(&redis.Options{Addr: proxy}), redis.NewClient(&redis.Options{Addr: proxy}))
	waittest.HoldAndWait(t, newStore(t, srv.NewClient()), waiters, func() {})
	waittest.RequirePolled(t, waiters)
}

// startMessageDropper starts a TCP proxy to upstream that drops what the
// server sends when it holds a published message, and passes the rest: a
// subscription that silently loses its messages.
func startMessageDropper(t *testing.T, upstream string) (addr string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", upstream)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(server, client); server.Close() })
			wg.Go(func() {
				defer client.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 && !bytes.Contains(buf[:n], []byte("$7\r\nmessage\r\n")) {
						if _, err := client.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// A message that is not a completed record wakes its watches with none:
// they read the record.
func TestWatchIgnoresAMessageItCannotRead(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	rec := reservation()
	woken := waittest.Watch(t, store, rec.Key)
	admin := srv.NewClient()
	for _, payload := range []string{"6:status", "6:status10:INPROGRESS10:expiration1:1", "x:y"} {
		require.NoError(t, admin.Publish(t.Context(), store.RedisKey(rec.Key), payload).Err())
		assert.Nil(t, <-woken, "%q", payload)
	}
}
