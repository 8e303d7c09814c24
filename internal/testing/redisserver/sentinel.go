package redisserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which StartSentinel monitors its primary.
const SentinelMaster = "mymaster"

// StartSentinel starts a redis-server in Sentinel mode that monitors
// primary as SentinelMaster (a quorum of one, a primary considered down
// after a second), and waits until it has found the primary's replicas, if
// it has any. Start the replicas first.
func StartSentinel(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	s := start(tb, func(s *Server) []string {
		// Sentinel rewrites its configuration file, so it needs one of
		// its own.
		s.conf = filepath.Join(s.dir, fmt.Sprintf("sentinel-%d.conf", s.Port))
		conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 10000\n", SentinelMaster, primary.Port)
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			tb.Fatalf("redisserver: writing the Sentinel configuration: %v", err)
		}
		return []string{"--sentinel"}
	})

	ctx := context.Background()
	replicas, err := primary.NewClient().Info(ctx, "replication").Result()
	if err != nil {
		tb.Fatalf("redisserver: INFO replication on the primary: %v", err)
	}
	want := 0
	for _, line := range strings.Split(replicas, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, "ip=") {
			want++
		}
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { _ = sc.Close() })
	waitFor(tb, "Sentinel to find the replicas", func() (bool, string) {
		found, err := sc.Replicas(ctx, SentinelMaster).Result()
		if err != nil {
			return false, err.Error()
		}
		up := 0
		for _, r := range found {
			if r["flags"] == "slave" {
				up++
			}
		}
		return up >= want, strconv.Itoa(up) + " of " + strconv.Itoa(want)
	})
	return s
}
