package redis_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrysafe/retrysafe/persistence"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// A store on one Redis node (or an ElastiCache primary endpoint), reserving
// a key and replaying its record on a second attempt. It needs a server on
// localhost:6379.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // honour the invocation's deadline
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	defer client.Close()

	store, err := redisstore.New(client, func(o *redisstore.Options) {
		o.KeyPrefix = "idempotency:"
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	now := time.Now()
	rec := &persistence.Record{
		Key:                 "orders.handler#9f86d081884c7d65",
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour).Truncate(time.Second),
		InProgressExpiresAt: now.Add(30 * time.Second),
		Token:               "token-of-this-invocation",
	}
	err = store.Put(ctx, rec, now)
	var conflict *persistence.ConflictError
	switch {
	case err == nil:
		fmt.Println("reserved", store.RedisKey(rec.Key))
	case errors.As(err, &conflict):
		fmt.Println("already", conflict.Existing.Status)
	default:
		log.Fatal(err) // the server could not be reached, or refused the write
	}
}

// A store on a Redis or Valkey cluster with TLS, such as ElastiCache with
// cluster mode and in-transit encryption, or MemoryDB. Reads that the
// client would send to replicas still go to primaries: the store's
// operations are scripts.
func ExampleNew_cluster() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"clustercfg.my-cluster.xxxxxx.use1.cache.amazonaws.com:6379"},
		TLSConfig:             &tls.Config{MinVersion: tls.VersionTLS12},
		ReadOnly:              true,
		ContextTimeoutEnabled: true,
	})
	defer client.Close()

	store, err := redisstore.New(client)
	if err != nil {
		log.Fatal(err)
	}
	_ = store // pass it to idempotency.Wrap
}

// A Sentinel-managed primary: the failover client follows the primary that
// Sentinel names.
func ExampleNew_sentinel() {
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()

	store, err := redisstore.New(client)
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}

// A primary with two replicas (ElastiCache with replicas, or Sentinel):
// each write waits until both replicas have it, so that a failover keeps
// the reservations and results.
func ExampleNew_waitReplicas() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "primary.example:6379",
		ContextTimeoutEnabled: true,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	defer client.Close()

	store, err := redisstore.New(client, func(o *redisstore.Options) {
		o.WaitReplicas = 2
		o.WaitTimeout = 500 * time.Millisecond // shorter than ReadTimeout
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}

// RedisKey shows where a record lives, for redis-cli (HGETALL, PTTL).
func ExampleStore_RedisKey() {
	// New makes no request: no server is needed here.
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	store, err := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = "idempotency:" })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(store.RedisKey("orders.handler#9f86d081884c7d65"))
	// Output: idempotency:orders.handler#9f86d081884c7d65
}
