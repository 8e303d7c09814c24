// Package pgserver starts throwaway PostgreSQL servers for tests and
// benchmarks: initdb into a temporary directory, postgres on a free
// loopback port (its unix socket in that directory too), one database per
// test, and the server stopped, by its process ID, when the test or the
// test binary ends.
//
// The binaries are Debian's (the postgresql package): the newest
// /usr/lib/postgresql/<version>/bin, unless IDEMPOTENCY_POSTGRES_BINDIR
// names another directory that holds initdb, postgres and psql, or they are
// on PATH. When none is installed, Start and Shared skip the test with a
// message saying how to install them, unless the environment sets
// IDEMPOTENCY_REQUIRE_INTEGRATION=1 (as CI does): then they fail it.
//
// PostgreSQL refuses to run as root. When the tests run as root (CI does),
// initdb and postgres run as the postgres user, which Debian's package
// creates, or else as a user of their own that Start creates with useradd
// (User). As any other user, they run as that user.
//
// The servers are for tests: authentication is trust on 127.0.0.1 and the
// socket, and fsync is off, so that a commit does not wait for the disk
// (what a benchmark measures is the server's work and the round trips, not
// the disk's). Freeze, Thaw and Restart disrupt a running server, for
// fault-injection tests: a crash of its processes loses nothing committed
// even so; a crash of the machine would.
//
// The package uses only the standard library (and psql, for the few
// statements it runs itself), so that the root module, which has no
// PostgreSQL driver, and the store's module can both use it.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// BinDirEnv is the environment variable that names the directory of the
// PostgreSQL binaries to use (initdb, postgres, psql).
const BinDirEnv = "IDEMPOTENCY_POSTGRES_BINDIR"

// User is the user that runs the server when the tests run as root and
// the machine has no postgres user: Start creates it (useradd --system)
// on first use.
const User = "retrysafe-pg"

// Superuser is the name of the server's superuser role, as whom every
// connection URL of a Server connects (authentication is trust).
const Superuser = "postgres"

// ErrUnavailable is matched (with errors.Is) by the error StartContext
// returns when PostgreSQL is not installed.
var ErrUnavailable = errors.New("pgserver: PostgreSQL is not installed")

const install = "install it, for example with `apt-get install -y postgresql` on Debian or Ubuntu, " +
	"or set " + BinDirEnv + " to the directory of its initdb, postgres and psql"

// startTimeout bounds initdb and the server's start (see
// testenv.StartTimeout).
const startTimeout = testenv.StartTimeout

// Server is a running (or stopped) PostgreSQL server.
type Server struct {
	// Host is "127.0.0.1", and Port the server's port on it.
	Host string
	Port int
	// Version is the server's version, such as "15.18".
	Version string

	dir    string // the temporary directory: data/, the socket, the log
	binDir string
	log    string // the server's log file

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{} // closed when proc has exited
	frozen bool          // Freeze stopped its processes
	dbs    atomic.Int64  // databases created, for unique names
}

// BinDir returns the directory of the binaries Start would run.
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		if err := hasBinaries(d); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v (%s)", ErrUnavailable, BinDirEnv, d, err, install)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// The newest version first: "17" after "9.6", by number.
	major := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		switch ma, mb := major(a), major(b); {
		case ma > mb:
			return -1
		case ma < mb:
			return 1
		}
		return 0
	})
	for _, d := range dirs {
		if hasBinaries(d) == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(p); hasBinaries(d) == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: no initdb, postgres and psql in /usr/lib/postgresql/*/bin or on PATH (%s)", ErrUnavailable, install)
}

func hasBinaries(dir string) error {
	for _, name := range []string{"initdb", "postgres", "psql"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable", filepath.Join(dir, name))
		}
	}
	return nil
}

var servers struct {
	once   sync.Once
	shared *Server
	err    error
}

// Start starts a server for the test tb and stops it when tb ends. When
// PostgreSQL is not installed, it skips tb (fails it when
// IDEMPOTENCY_REQUIRE_INTEGRATION=1); any other failure to start fails tb.
func Start(tb testenv.TB) *Server {
	tb.Helper()
	s, err := StartContext(tb.Context())
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return s
}

// Shared returns a server shared by every test of the test binary,
// starting it on first use, and handles errors as Start does. Call Main
// from TestMain so that it is stopped when the tests end; the server also
// exits when the test binary does (on Linux, by a parent-death signal).
func Shared(tb testenv.TB) *Server {
	tb.Helper()
	servers.once.Do(func() {
		servers.shared, servers.err = StartContext(context.Background())
	})
	if servers.err != nil {
		skipOrFail(tb, servers.err)
	}
	return servers.shared
}

// Main runs the tests of m, then stops the server that Shared started, if
// any, and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgserver.Main(m) }
func Main(m testenv.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the server that Shared started, if any, and reports a
// failure to stop it on standard error.
func StopShared() {
	if s := servers.shared; s != nil {
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

func skipOrFail(tb testenv.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrUnavailable) {
		testenv.SkipUnlessRequired(tb, err)
	}
	tb.Fatal(err)
}

// StartContext starts a server and returns it; the caller must Stop it.
// It does not skip or fail anything. The error matches ErrUnavailable when
// PostgreSQL is not installed. ctx bounds the start only.
func StartContext(ctx context.Context) (_ *Server, err error) {
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	dir, err := os.MkdirTemp("", "pgserver-")
	if err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	s := &Server{Host: "127.0.0.1", dir: dir, binDir: binDir, log: filepath.Join(dir, "postgres.log")}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if err := ownDir(dir, cred); err != nil {
		return nil, fmt.Errorf("pgserver: giving %s to the server's user: %w", dir, err)
	}
	if s.Version, err = version(ctx, binDir); err != nil {
		return nil, err
	}
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"-D", s.dataDir(), "-U", Superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	setCredential(initdb, cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgserver: initdb: %v\n%s", err, tail(out))
	}
	// Another process may take the port between our probe and the
	// server's bind; try a few ports before giving up.
	for range 5 {
		if s.Port, err = freePort(); err != nil {
			return nil, fmt.Errorf("pgserver: finding a free port: %w", err)
		}
		if err = s.launch(ctx, cred); err == nil || !strings.Contains(err.Error(), "could not bind") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// launch starts postgres on s.Port and waits until it accepts connections.
func (s *Server) launch(ctx context.Context, cred *credential) error {
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(s.binDir, "postgres"),
		"-D", s.dataDir(),
		"-c", "listen_addresses="+s.Host,
		"-c", "port="+strconv.Itoa(s.Port),
		"-c", "unix_socket_directories="+s.dir,
		"-c", "max_connections=300",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "logging_collector=off",
	)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	setCredential(cmd, cred)
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgserver: starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.proc, s.exited = cmd, exited
	s.mu.Unlock()

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			s.mu.Lock()
			s.proc = nil
			s.mu.Unlock()
			return fmt.Errorf("pgserver: postgres exited during startup (%v):\n%s", cmd.ProcessState, s.Log())
		case <-ctx.Done():
			_ = s.Stop()
			return fmt.Errorf("pgserver: postgres did not accept connections on %s: %w\n%s", s.Addr(), ctx.Err(), s.Log())
		case <-tick.C:
		}
		if s.ready() {
			return nil
		}
	}
}

// ready reports whether the server says it accepts connections (the
// status line of postmaster.pid, PostgreSQL 10 and later) and its port
// does.
func (s *Server) ready() bool {
	b, err := os.ReadFile(filepath.Join(s.dataDir(), "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
		return false
	}
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Addr returns the server's address, "127.0.0.1:<port>".
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// URL returns the connection URL of database on the server, as the
// superuser, over TCP without TLS: what pgx.ParseConfig and
// pgxpool.ParseConfig take.
func (s *Server) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     s.Addr(),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// SocketDir returns the directory of the server's unix socket.
func (s *Server) SocketDir() string { return s.dir }

// NewDatabase creates a database of its own for tb, named after it, and
// returns its URL. The database goes with the server.
func (s *Server) NewDatabase(tb testenv.TB) string {
	tb.Helper()
	name := DatabaseName(tb.Name(), s.dbs.Add(1))
	if err := s.CreateDatabase(tb.Context(), name); err != nil {
		tb.Fatal(err)
	}
	return s.URL(name)
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9_]+`)

// DatabaseName returns a database name made of a test's name and n, at
// most 63 bytes (PostgreSQL's limit on names) of [a-z0-9_].
func DatabaseName(test string, n int64) string {
	suffix := "_" + strconv.FormatInt(n, 10)
	name := strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(test), "_"), "_")
	if len(name) > 63-len(suffix)-2 {
		name = name[:63-len(suffix)-2]
	}
	return "t_" + name + suffix
}

// CreateDatabase creates the database name.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	_, err := s.Query(ctx, "postgres", "CREATE DATABASE "+quoteIdent(name))
	return err
}

// Query runs sql in database with psql, as the superuser, and returns its
// output: unaligned rows, fields separated by "|", without headers.
func (s *Server) Query(ctx context.Context, database, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, "psql"),
		"-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", s.Host, "-p", strconv.Itoa(s.Port), "-U", Superuser, "-d", database,
		"-c", sql)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("pgserver: psql %q in %s: %v: %s", sql, database, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Log returns the end of the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return tail(b)
}

// Pid returns the process ID of the server (the postmaster), or 0 once it
// is stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Process.Pid
}

// Stop stops the server (an immediate shutdown: SIGQUIT to its pid, then
// SIGKILL to its process group if it has not exited within 30 seconds),
// waits until it has exited, and removes its directory. Stopping a
// stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.stopLocked()
	if s.dir != "" && err == nil {
		if rmErr := os.RemoveAll(s.dir); rmErr != nil {
			err = fmt.Errorf("pgserver: %w", rmErr)
		}
		s.dir = ""
	}
	return err
}

// stopLocked stops the server's processes, as Stop does, and keeps its
// directory. s.mu is held.
func (s *Server) stopLocked() error {
	if s.proc == nil {
		return nil
	}
	if s.frozen {
		_ = signalServer(s.proc, false)
		s.frozen = false
	}
	var err error
	quit(s.proc)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		kill(s.proc)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			err = fmt.Errorf("pgserver: postgres (pid %d) did not exit", s.proc.Process.Pid)
		}
	}
	s.proc = nil
	return err
}

// Freeze stops every process of the server, the postmaster and the
// processes it started, its backends among them (SIGSTOP), until Thaw: connections are
// accepted by the kernel, and statements sent, but nothing is answered.
// A statement that reached a backend before or during the freeze runs
// when it thaws, whether or not its client still waits for it. Freeze
// returns an error where there are no such signals (not on Unix).
func (s *Server) Freeze() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return errors.New("pgserver: Freeze of a stopped server")
	}
	if err := signalServer(s.proc, true); err != nil {
		return fmt.Errorf("pgserver: freezing postgres: %w", err)
	}
	s.frozen = true
	return nil
}

// Thaw resumes the processes that Freeze stopped (SIGCONT).
func (s *Server) Thaw() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return errors.New("pgserver: Thaw of a stopped server")
	}
	if err := signalServer(s.proc, false); err != nil {
		return fmt.Errorf("pgserver: thawing postgres: %w", err)
	}
	s.frozen = false
	return nil
}

// Restart crashes the server and starts it again, on the same port and
// data: an immediate shutdown (SIGQUIT: the backends end at once, without
// a checkpoint), then a start that recovers from the write-ahead log, as
// after a crash of the server's processes. Every connection ends, and
// every open transaction with it. Nothing committed is lost: although
// fsync is off, the log is in the operating system's page cache, which a
// crash of the processes keeps (a crash of the machine would not).
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	if s.proc == nil {
		s.mu.Unlock()
		return errors.New("pgserver: Restart of a stopped server")
	}
	err := s.stopLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	cred, err := serverCredential()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// The port was the server's a moment ago; another process may have
	// taken it since, or the kernel not released it yet.
	for range 50 {
		if err = s.launch(ctx, cred); err == nil || !strings.Contains(err.Error(), "could not bind") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// version returns the version that postgres --version prints.
func version(ctx context.Context, binDir string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pgserver: postgres --version: %w", err)
	}
	f := strings.Fields(string(out))
	for _, w := range f {
		if w != "" && w[0] >= '0' && w[0] <= '9' {
			return w, nil
		}
	}
	return "", fmt.Errorf("pgserver: no version in %q", out)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// credential is the user the server runs as, when not the current one.
type credential struct {
	name     string
	uid, gid uint32
}

var userOnce struct {
	sync.Once
	cred *credential
	err  error
}

// serverCredential returns the user that initdb and postgres run as: nil
// (the current user) unless the current user is root, then postgres, or
// User, created on first use.
func serverCredential() (*credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	userOnce.Do(func() {
		u, err := user.Lookup("postgres")
		if err != nil {
			if u, err = user.Lookup(User); err != nil {
				out, addErr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", User).CombinedOutput()
				if addErr != nil {
					userOnce.err = fmt.Errorf("pgserver: PostgreSQL does not run as root, and creating user %s failed: %v: %s", User, addErr, bytes.TrimSpace(out))
					return
				}
				if u, err = user.Lookup(User); err != nil {
					userOnce.err = fmt.Errorf("pgserver: %w", err)
					return
				}
			}
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			userOnce.err = fmt.Errorf("pgserver: user %s: %w", u.Username, err)
			return
		}
		userOnce.cred = &credential{name: u.Username, uid: uint32(uid), gid: uint32(gid)}
	})
	return userOnce.cred, userOnce.err
}

// ownDir gives dir to the server's user.
func ownDir(dir string, cred *credential) error {
	if cred == nil {
		return nil
	}
	return os.Chown(dir, int(cred.uid), int(cred.gid))
}
