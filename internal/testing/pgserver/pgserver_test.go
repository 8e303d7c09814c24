package pgserver_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

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
