package pgserver_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
)

func TestMain(m *testing.M) { pgserver.Main(m) }

func TestStartQueryStop(t *testing.T) {
	srv := pgserver.Start(t)
	require.Equal(t, "127.0.0.1", srv.Host)
	require.NotZero(t, srv.Port)
	require.NotEmpty(t, srv.Version)
	ctx := t.Context()

	out, err := srv.Query(ctx, "postgres", "SELECT current_user, current_setting('fsync'), current_setting('listen_addresses')")
	require.NoError(t, err)
	require.Equal(t, "postgres|off|127.0.0.1", out)

	// The server runs as a user other than root, and its socket is in
	// its own directory.
	pid := srv.Pid()
	require.NotZero(t, pid)
	st, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err == nil {
		require.NotEqual(t, uint32(0), st.Sys().(*syscall.Stat_t).Uid, "postgres runs as root")
	}
	_, err = os.Stat(filepath.Join(srv.SocketDir(), ".s.PGSQL."+strconv.Itoa(srv.Port)))
	require.NoError(t, err)

	// A database of the test's own.
	u := srv.NewDatabase(t)
	require.True(t, strings.HasPrefix(u, "postgres://postgres@"+srv.Addr()+"/t_teststartquerystop_"), u)
	db := u[strings.LastIndex(u, "/")+1 : strings.Index(u, "?")]
	_, err = srv.Query(ctx, db, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	out, err = srv.Query(ctx, db, "SELECT count(*) FROM t")
	require.NoError(t, err)
	require.Equal(t, "1", out)
	_, err = srv.Query(ctx, "postgres", "SELECT count(*) FROM t")
	require.ErrorContains(t, err, `relation "t" does not exist`)

	dir := srv.SocketDir()
	addr := srv.Addr()
	require.NoError(t, srv.Stop())
	_, err = net.Dial("tcp", addr)
	require.Error(t, err, "the port still accepts connections after Stop")
	require.Zero(t, srv.Pid())
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "Stop leaves the server's directory")
	require.NoError(t, srv.Stop()) // a second Stop does nothing
}

func TestServersAreSeparate(t *testing.T) {
	a, b := pgserver.Start(t), pgserver.Shared(t)
	require.NotEqual(t, a.Addr(), b.Addr())
	require.Same(t, b, pgserver.Shared(t))
	ctx := t.Context()
	require.NoError(t, a.CreateDatabase(ctx, "only_on_a"))
	out, err := b.Query(ctx, "postgres", "SELECT count(*) FROM pg_database WHERE datname = 'only_on_a'")
	require.NoError(t, err)
	require.Equal(t, "0", out)
}

func TestDatabaseName(t *testing.T) {
	for _, tc := range []struct {
		test string
		want string
	}{
		{"TestX", "t_testx_7"},
		{"TestConformance/Protocol/reserve/own_in_progress", "t_testconformance_protocol_reserve_own_in_progress_7"},
		{strings.Repeat("A", 100), "t_" + strings.Repeat("a", 63-2-2) + "_7"},
	} {
		got := pgserver.DatabaseName(tc.test, 7)
		require.Equal(t, tc.want, got)
		require.LessOrEqual(t, len(got), 63)
	}
}

// A restart is a crash of the server's processes: what committed before
// it is there after it, on the same port.
func TestRestartKeepsWhatCommitted(t *testing.T) {
	srv := pgserver.Start(t)
	ctx := t.Context()
	addr, pid := srv.Addr(), srv.Pid()
	require.NoError(t, srv.CreateDatabase(ctx, "d"))
	_, err := srv.Query(ctx, "d", "CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2)")
	require.NoError(t, err)

	require.NoError(t, srv.Restart(ctx))
	require.Equal(t, addr, srv.Addr())
	require.NotEqual(t, pid, srv.Pid(), "a new postmaster")
	out, err := srv.Query(ctx, "d", "SELECT count(*) FROM t")
	require.NoError(t, err)
	require.Equal(t, "2", out)
	require.Contains(t, srv.Log(), "database system was interrupted", "the start recovered from a crash")
}

// Freeze stops the postmaster and its backends; Thaw resumes them.
func TestFreezeStopsEveryProcess(t *testing.T) {
	srv := pgserver.Start(t)
	ctx := t.Context()
	pid := srv.Pid()
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil {
		t.Skip("no /proc to read the processes' states from")
	}
	// The processes of the server: the postmaster, and those it started
	// (its auxiliary processes and backends), each the leader of a
	// session of its own.
	group := func() map[int]string {
		states := map[int]string{}
		entries, err := os.ReadDir("/proc")
		require.NoError(t, err)
		for _, e := range entries {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
			if len(f) > 1 && (p == pid || f[1] == strconv.Itoa(pid)) {
				states[p] = f[0]
			}
		}
		return states
	}
	// The postmaster accepts connections before it has started its
	// auxiliary processes; once a query has run, they run too.
	_, err := srv.Query(ctx, "postgres", "SELECT 1")
	require.NoError(t, err)
	require.NoError(t, srv.Freeze())
	// A signal reaches a process that is running on another CPU when the
	// kernel next schedules it: wait for every process to show it.
	// A backend that exited stays a zombie (Z) while its parent, stopped,
	// cannot reap it: it runs nothing.
	stopped := func(states map[int]string) bool {
		for _, state := range states {
			if state != "T" && state != "Z" {
				return false
			}
		}
		return true
	}
	states := group()
	for deadline := time.Now().Add(10 * time.Second); !stopped(states) && time.Now().Before(deadline); states = group() {
		time.Sleep(10 * time.Millisecond)
	}
	require.Greater(t, len(states), 1, "the postmaster and its processes: %v", states)
	for p, state := range states {
		require.Contains(t, []string{"T", "Z"}, state, "process %d is not stopped", p)
	}
	require.NoError(t, srv.Thaw())
	for p, state := range group() {
		require.NotEqual(t, "T", state, "process %d is still stopped", p)
	}
	out, err := srv.Query(ctx, "postgres", "SELECT 1")
	require.NoError(t, err)
	require.Equal(t, "1", out)

	require.NoError(t, srv.Freeze())
	require.NoError(t, srv.Stop(), "a frozen server stops")
}
