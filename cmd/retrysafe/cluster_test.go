package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

func TestRedisCluster(t *testing.T) {
	cluster := redisserver.StartCluster(t, 0)
	s, err := redisstore.New(cluster.NewClient(), func(o *redisstore.Options) { o.KeyPrefix = "idempotency:" })
	require.NoError(t, err)
	f := &fixture{name: "Redis Cluster", store: s, flags: []string{"--redis", "redis://" + cluster.Primary.Addr, "--cluster", "--redis-prefix", "idempotency:"}}
	putGolden(t, f)
	for _, tc := range []struct{ name, command string }{{"stats.txt", "stats"}, {"ls.txt", "ls"}} {
		r := runAt(t, goldenNow, "", f.with(tc.command)...)
		requireOK(t, r)
		golden(t, tc.name, r.stdout)
	}
	r := runAt(t, goldenNow, "", f.with("get", goldenRecords[0].Key)...)
	requireOK(t, r)
	golden(t, "get-completed.txt", r.stdout)
}
