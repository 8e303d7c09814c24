package redis_test

import (
	"crypto/rand"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// response is the benchmarks' response, an API Gateway proxy response.
const response = `{"statusCode":201,"body":"{\"id\":\"p_1\"}","headers":{"Content-Type":"application/json"}}`

// benchStore starts a redis-server for b, and returns a client and a
// store on it, the prefix of the benchmark's keys, and a completed record
// holding response. The server also holds response as the plain value of
// the key "plain".
func benchStore(b *testing.B, name string) (*redis.Client, *redisstore.Store, string, *persistence.Record) {
	b.Helper()
	client := redisserver.Start(b).NewClient()
	store := newStore(b, client)
	now := testNow()
	prefix := name + "#" + rand.Text() + "#"
	require.NoError(b, client.Set(b.Context(), "plain", response, 0).Err())
	done := completed(recordtest.InProgress(prefix+"done", now), response)
	require.NoError(b, store.Put(b.Context(), done, now))
	require.NoError(b, store.Update(b.Context(), done))
	return client, store, prefix, done
}

// measure runs op once per benchmark iteration, timing each call, and
// reports the median and 99th percentile next to ns/op.
func measure(b *testing.B, op func(i int)) {
	b.Helper()
	b.ReportAllocs()
	durations := make([]time.Duration, 0, 1<<16)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		op(i)
		durations = append(durations, time.Since(start))
	}
	reportPercentiles(b, "", durations)
}

// reportPercentiles reports the median and 99th percentile of durations as
// metrics named prefix+"p50-ns" and prefix+"p99-ns".
func reportPercentiles(b *testing.B, prefix string, durations []time.Duration) {
	if len(durations) == 0 {
		return
	}
	slices.Sort(durations)
	at := func(p float64) time.Duration { return durations[int(p*float64(len(durations)-1))] }
	b.ReportMetric(float64(at(0.50).Nanoseconds()), prefix+"p50-ns")
	b.ReportMetric(float64(at(0.99).Nanoseconds()), prefix+"p99-ns")
}

// BenchmarkStore measures the store's operations against a local
// redis-server, next to a plain GET on the same server and connection.
//
// FirstCall is what a first invocation costs the store (Put of a new key,
// then Update to complete it: two round trips), Replay what a retry of a
// completed invocation costs (a Put that conflicts and returns the record:
// one round trip).
func BenchmarkStore(b *testing.B) {
	client, store, prefix, done := benchStore(b, "bench")
	ctx := b.Context()
	now := testNow()

	b.Run("GET", func(b *testing.B) {
		measure(b, func(int) {
			if err := client.Get(ctx, "plain").Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("PutNew", func(b *testing.B) {
		base := prefix + "new-" + rand.Text() + "-"
		measure(b, func(i int) {
			if err := store.Put(ctx, recordtest.InProgress(base+strconv.Itoa(i), now), now); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Update", func(b *testing.B) {
		rec := recordtest.InProgress(prefix+"update-"+rand.Text(), now)
		require.NoError(b, store.Put(ctx, rec, now))
		next := completed(rec, response)
		measure(b, func(int) {
			if err := store.Update(ctx, next); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("FirstCall", func(b *testing.B) {
		base := prefix + "first-" + rand.Text() + "-"
		measure(b, func(i int) {
			rec := recordtest.InProgress(base+strconv.Itoa(i), now)
			if err := store.Put(ctx, rec, now); err != nil {
				b.Fatal(err)
			}
			if err := store.Update(ctx, completed(rec, response)); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Replay", func(b *testing.B) {
		probe := recordtest.InProgress(done.Key, now)
		measure(b, func(int) {
			var conflict *persistence.ConflictError
			if err := store.Put(ctx, probe, now); !errors.As(err, &conflict) || conflict.Existing.Status != persistence.StatusCompleted {
				b.Fatalf("Put over a completed record: %v", err)
			}
		})
	})
	b.Run("Get", func(b *testing.B) {
		measure(b, func(int) {
			if _, err := store.Get(ctx, done.Key); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkInterleaved times, in every iteration, a plain GET, a first call
// (Put of a new key and Update: two round trips) and a replay (a Put that
// conflicts with a completed record: one round trip), one after the other,
// so that the three see the same load on a noisy machine. It reports the
// median and 99th percentile of each; ns/op is the sum of the three.
func BenchmarkInterleaved(b *testing.B) {
	client, store, prefix, done := benchStore(b, "interleaved")
	ctx := b.Context()
	now := testNow()
	probe := recordtest.InProgress(done.Key, now)
	interleave(b, client, func(i int) {
		rec := recordtest.InProgress(prefix+strconv.Itoa(i), now)
		if err := store.Put(ctx, rec, now); err != nil {
			b.Fatal(err)
		}
		if err := store.Update(ctx, completed(rec, response)); err != nil {
			b.Fatal(err)
		}
	}, func() {
		var conflict *persistence.ConflictError
		if err := store.Put(ctx, probe, now); !errors.As(err, &conflict) {
			b.Fatalf("Put over a completed record: %v", err)
		}
	})
}

// interleave times, in every iteration of b, a plain GET of the key
// "plain" with client, then first(i) and replay(), one after the other,
// so that the three see the same load, and reports the median and 99th
// percentile of each.
func interleave(b *testing.B, client *redis.Client, first func(i int), replay func()) {
	b.Helper()
	var gets, firsts, replays []time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if err := client.Get(b.Context(), "plain").Err(); err != nil {
			b.Fatal(err)
		}
		gets = append(gets, time.Since(start))

		start = time.Now()
		first(i)
		firsts = append(firsts, time.Since(start))

		start = time.Now()
		replay()
		replays = append(replays, time.Since(start))
	}
	reportPercentiles(b, "get-", gets)
	reportPercentiles(b, "first-", firsts)
	reportPercentiles(b, "replay-", replays)
}

// BenchmarkWrapInterleaved is BenchmarkInterleaved through idempotency.Wrap:
// in every iteration a plain GET, a first call of a wrapped handler (new
// key: reserve, run, complete) and a replay (a key that has completed).
func BenchmarkWrapInterleaved(b *testing.B) {
	srv := redisserver.Start(b)
	client := srv.NewClient()
	store := newStore(b, client)
	ctx := b.Context()
	c := &charger{}
	h, err := idempotency.Wrap(c.handle, store, idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders"))
	require.NoError(b, err)
	require.NoError(b, client.Set(ctx, "plain", `{"charge_id":"ch_1","amount":4200}`, 0).Err())
	done := newOrder()
	_, err = h(ctx, done)
	require.NoError(b, err)
	base := rand.Text()

	interleave(b, client, func(i int) {
		if _, err := h(ctx, order{OrderID: base + strconv.Itoa(i), Amount: i}); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if _, err := h(ctx, done); err != nil {
			b.Fatal(err)
		}
	})
	if runs := c.runs.Load(); runs != int64(b.N)+1 {
		b.Fatalf("the handler ran %d times, want %d", runs, b.N+1)
	}
}

// BenchmarkWaitReplicas measures a first call's writes (Put and Update) on
// a primary with one replica, without and with Options.WaitReplicas, so
// that the cost of waiting for the replica's acknowledgements shows.
func BenchmarkWaitReplicas(b *testing.B) {
	primary := redisserver.Start(b)
	redisserver.StartReplica(b, primary)
	client := primary.NewClient()
	ctx := b.Context()
	now := testNow()
	for _, replicas := range []int{0, 1} {
		store := newStore(b, client, withWait(replicas, 0))
		b.Run("FirstCall/wait_"+strconv.Itoa(replicas), func(b *testing.B) {
			base := "wait#" + rand.Text() + "-"
			measure(b, func(i int) {
				rec := recordtest.InProgress(base+strconv.Itoa(i), now)
				if err := store.Put(ctx, rec, now); err != nil {
					b.Fatal(err)
				}
				if err := store.Update(ctx, completed(rec, `{"id":"p_1"}`)); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
