package redisserver_test

import (
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

func TestStartRestartStop(t *testing.T) {
	srv := redisserver.Start(t)
	require.True(t, strings.HasPrefix(srv.Addr, "127.0.0.1:"), srv.Addr)
	c := srv.NewClient()
	ctx := t.Context()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

	// Nothing is saved to disk.
	save, err := c.ConfigGet(ctx, "save").Result()
	require.NoError(t, err)
	require.Equal(t, "", save["save"])
	aof, err := c.ConfigGet(ctx, "appendonly").Result()
	require.NoError(t, err)
	require.Equal(t, "no", aof["appendonly"])

	addr := srv.Addr
	srv.Restart()
	require.Equal(t, addr, srv.Addr)
	// The client reconnects to the same address and finds no data.
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 30*time.Second, 10*time.Millisecond)
	n, err := c.Exists(ctx, "k").Result()
	require.NoError(t, err)
	require.Zero(t, n)

	srv.Stop()
	_, err = net.Dial("tcp", addr)
	require.Error(t, err, "the port still accepts connections after Stop")
	srv.Stop() // a second Stop does nothing
}

func TestServersAreSeparate(t *testing.T) {
	a, b := redisserver.Start(t), redisserver.Start(t)
	require.NotEqual(t, a.Addr, b.Addr)
	ctx := t.Context()
	require.NoError(t, a.NewClient().Set(ctx, "k", "a", 0).Err())
	n, err := b.NewClient().Exists(ctx, "k").Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestFreezeThaw(t *testing.T) {
	srv := redisserver.Start(t)
	c := srv.NewClient(func(o *redis.Options) {
		o.ReadTimeout = 50 * time.Millisecond
		o.MaxRetries = -1
	})
	ctx := t.Context()
	require.NoError(t, c.Ping(ctx).Err())

	srv.Freeze()
	err := c.Ping(ctx).Err()
	srv.Thaw()
	var netErr net.Error
	require.ErrorAs(t, err, &netErr)
	require.True(t, netErr.Timeout(), "%v", err)

	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 30*time.Second, 10*time.Millisecond)

	// Stop ends a frozen server too.
	srv.Freeze()
	srv.Stop()
}

func TestStartReplica(t *testing.T) {
	primary := redisserver.Start(t)
	ctx := t.Context()
	require.NoError(t, primary.NewClient().Set(ctx, "k", "v", 0).Err())
	replica := redisserver.StartReplica(t, primary)
	c := replica.NewClient(func(o *redis.Options) { o.MaxRetries = -1 })
	require.Eventually(t, func() bool {
		v, err := c.Get(ctx, "k").Result()
		return err == nil && v == "v"
	}, 30*time.Second, 10*time.Millisecond)
	err := c.Set(ctx, "k", "w", 0).Err()
	require.True(t, redis.IsReadOnlyError(err), "%v", err)
}

// fakeTB records how Start ends a test. Its Skipf and Fatalf stop the
// goroutine, as testing's do.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	skipped string
	failed  string
	dir     string
}

func (f *fakeTB) Helper()             {}
func (f *fakeTB) TempDir() string     { return f.dir }
func (f *fakeTB) Cleanup(func())      {}
func (f *fakeTB) Logf(string, ...any) {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func startWithFake(t *testing.T) *fakeTB {
	f := &fakeTB{TB: t, dir: t.TempDir()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redisserver.Start(f)
		t.Error("Start returned with no server binary")
	}()
	<-done
	return f
}

const installHint = "apt-get install -y redis-server"

func TestMissingBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-redis-server")
	t.Setenv(redisserver.BinaryEnv, missing)

	_, err := redisserver.Binary()
	require.ErrorContains(t, err, missing)
	require.ErrorContains(t, err, installHint)

	t.Setenv(testenv.RequireEnv, "")
	f := startWithFake(t)
	require.Contains(t, f.skipped, missing)
	require.Contains(t, f.skipped, installHint)
	require.Empty(t, f.failed)

	t.Setenv(testenv.RequireEnv, "1")
	f = startWithFake(t)
	require.Empty(t, f.skipped)
	require.Contains(t, f.failed, missing)
	require.Contains(t, f.failed, testenv.RequireEnv+"=1")
}

func TestStartCluster(t *testing.T) {
	cluster := redisserver.StartCluster(t, 1)
	ctx := t.Context()
	c := cluster.NewClient()
	for i := range 20 {
		key := fmt.Sprintf("key-%d", i) // keys in many slots
		require.NoError(t, c.Set(ctx, key, i, 0).Err())
		n, err := c.Get(ctx, key).Int()
		require.NoError(t, err)
		require.Equal(t, i, n)
	}
	require.Len(t, cluster.Replicas, 1)
	role, err := cluster.Replicas[0].NewClient().Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "slave", role[0])
}

func TestStartSentinel(t *testing.T) {
	primary := redisserver.Start(t)
	replica := redisserver.StartReplica(t, primary)
	sentinel := redisserver.StartSentinel(t, primary)
	ctx := t.Context()

	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    redisserver.SentinelMaster,
		SentinelAddrs: []string{sentinel.Addr},
	})
	t.Cleanup(func() { _ = client.Close() })
	require.NoError(t, client.Set(ctx, "k", "v", 0).Err())
	v, err := primary.NewClient().Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)

	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	t.Cleanup(func() { _ = sc.Close() })
	addr, err := sc.GetMasterAddrByName(ctx, redisserver.SentinelMaster).Result()
	require.NoError(t, err)
	require.Equal(t, primary.Addr, net.JoinHostPort(addr[0], addr[1]))
	replicas, err := sc.Replicas(ctx, redisserver.SentinelMaster).Result()
	require.NoError(t, err)
	require.Len(t, replicas, 1)
	require.Equal(t, replica.Addr, net.JoinHostPort(replicas[0]["ip"], replicas[0]["port"]))
}
