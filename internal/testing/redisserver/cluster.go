package redisserver

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of one shard: a primary that owns all 16384
// slots, and its replicas. Cluster clients route by slot to the primary, and
// read-only commands to the replicas when asked to (ReadOnly, RouteRandomly,
// RouteByLatency), as they would on a cluster of many shards.
type Cluster struct {
	Primary  *Server
	Replicas []*Server

	tb testing.TB
}

// StartCluster starts a cluster of one primary and the given number of
// replicas (Redis 7 or later, for --cluster-port), and waits until every
// node reports the cluster healthy and the replicas are in sync.
func StartCluster(tb testing.TB, replicas int) *Cluster {
	tb.Helper()
	requireMajorVersion(tb, 7, "--cluster-port")
	ctx := context.Background()
	c := &Cluster{tb: tb}
	c.Primary = startClusterNode(tb)
	pc := c.Primary.NewClient()
	// Stream data to replicas at once; and ping them every second, so that
	// their replication offset moves and the cluster lists them as usable
	// (a replica at offset 0 is left out of CLUSTER SLOTS).
	for _, kv := range [][2]string{{"repl-diskless-sync-delay", "0"}, {"repl-ping-replica-period", "1"}} {
		if err := pc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			tb.Fatalf("redisserver: configuring cluster primary: %v", err)
		}
	}
	if err := pc.ClusterAddSlotsRange(ctx, 0, 16383).Err(); err != nil {
		tb.Fatalf("redisserver: CLUSTER ADDSLOTS: %v", err)
	}
	primaryID, err := pc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		tb.Fatalf("redisserver: CLUSTER MYID: %v", err)
	}
	primaryBus := c.Primary.busPort

	for range replicas {
		r := startClusterNode(tb)
		rc := r.NewClient()
		if err := rc.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", c.Primary.Port, primaryBus).Err(); err != nil {
			tb.Fatalf("redisserver: CLUSTER MEET: %v", err)
		}
		waitFor(tb, "the replica to learn of the primary", func() (bool, string) {
			nodes, err := rc.ClusterNodes(ctx).Result()
			return err == nil && strings.Contains(nodes, primaryID), nodes
		})
		if err := rc.Do(ctx, "CLUSTER", "REPLICATE", primaryID).Err(); err != nil {
			tb.Fatalf("redisserver: CLUSTER REPLICATE: %v", err)
		}
		waitFor(tb, "the replica to sync", func() (bool, string) {
			info, err := rc.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up"), info
		})
		c.Replicas = append(c.Replicas, r)
	}

	for _, node := range append([]*Server{c.Primary}, c.Replicas...) {
		nc := node.NewClient()
		waitFor(tb, "cluster_state:ok on "+node.Addr, func() (bool, string) {
			info, err := nc.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false, info
			}
			// Every node lists the primary with all its replicas, so that
			// clients see them whichever node they ask.
			slots, err := nc.ClusterSlots(ctx).Result()
			return err == nil && len(slots) == 1 && len(slots[0].Nodes) == 1+replicas, info
		})
	}
	return c
}

// NewClient returns a cluster client seeded with the primary's address,
// with go-redis's defaults except for the options optFns change. It is
// closed when the test ends.
func (c *Cluster) NewClient(optFns ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	opt := &redis.ClusterOptions{Addrs: []string{c.Primary.Addr}}
	for _, fn := range optFns {
		fn(opt)
	}
	client := redis.NewClusterClient(opt)
	c.tb.Cleanup(func() { _ = client.Close() })
	return client
}

func startClusterNode(tb testing.TB) *Server {
	tb.Helper()
	var bus int
	s := start(tb, func(*Server) []string {
		var err error
		if bus, err = freePort(); err != nil {
			tb.Fatalf("redisserver: finding a free port: %v", err)
		}
		return []string{
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes-" + strconv.Itoa(bus) + ".conf",
			"--cluster-announce-ip", "127.0.0.1",
			"--cluster-node-timeout", "1000",
		}
	})
	s.busPort = bus
	return s
}

// waitFor polls cond until it holds, failing the test after startTimeout.
func waitFor(tb testing.TB, what string, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redisserver: timed out waiting for %s:\n%s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireMajorVersion skips the test when the server binary is older than
// major, for a feature that needs it.
func requireMajorVersion(tb testing.TB, major int, feature string) {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		start(tb, nil) // skips or fails as Start does
		return
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		tb.Fatalf("redisserver: %s --version: %v", bin, err)
	}
	// "Redis server v=7.0.15 sha=..." or "Valkey server v=8.0.1 ..."
	_, v, ok := strings.Cut(string(out), " v=")
	if !ok {
		tb.Fatalf("redisserver: cannot read the version in %q", out)
	}
	v, _, _ = strings.Cut(v, ".")
	got, err := strconv.Atoi(v)
	if err != nil {
		tb.Fatalf("redisserver: cannot read the version in %q", out)
	}
	if got < major {
		tb.Skipf("skipping: %s is version %d; %s needs %d or later", bin, got, feature, major)
	}
}
