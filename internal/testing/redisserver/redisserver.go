// Package redisserver starts throwaway redis-server processes for tests and
// benchmarks: one per call to Start, on a free loopback port, with no
// persistence to disk, stopped when the test ends.
//
// Tests that use it run in parallel with other test processes, each with
// servers of its own. When no server binary is installed, Start skips the
// test with a message saying how to install one, unless the environment sets
// IDEMPOTENCY_REQUIRE_INTEGRATION=1 (as CI does): then it fails the test.
//
// The binary is, in order: the path in IDEMPOTENCY_REDIS_SERVER (for example
// a valkey-server), redis-server on PATH, /usr/sbin/redis-server,
// /usr/bin/redis-server, valkey-server on PATH.
package redisserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// BinaryEnv is the environment variable that names the server binary to use.
const BinaryEnv = "IDEMPOTENCY_REDIS_SERVER"

// startTimeout bounds how long a server may take to answer PING after it was
// started (see testenv.StartTimeout).
const startTimeout = testenv.StartTimeout

// Server is a running (or stopped) redis-server process.
type Server struct {
	// Addr is the server's address, "127.0.0.1:<port>". It stays the same
	// across Restart.
	Addr string
	// Port is the port in Addr.
	Port int

	tb      testing.TB
	bin     string
	dir     string
	extra   []string // additional command-line arguments, kept across restarts
	busPort int      // the cluster bus port of a cluster node
	conf    string   // a configuration file, given before the arguments

	mu      sync.Mutex
	proc    *exec.Cmd
	exited  chan struct{} // closed when proc has exited
	frozen  bool
	starts  int
	clients []*redis.Client
}

// Binary returns the path of the server binary that Start would run.
func Binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("redisserver: %s=%s: %w (%s)", BinaryEnv, p, err, install)
		}
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/redis-server", "/usr/bin/redis-server"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("valkey-server"); err == nil {
		return p, nil
	}
	return "", errors.New("redisserver: redis-server not found on PATH, in /usr/sbin or /usr/bin (" + install + ")")
}

const install = "install it, for example with `apt-get install -y redis-server` on Debian or Ubuntu, " +
	"or set " + BinaryEnv + " to a redis-server or valkey-server binary"

// Start starts a redis-server on a free loopback port, waits until it answers
// PING, and stops it when the test ends. It skips the test when no server
// binary is installed, or fails it if IDEMPOTENCY_REQUIRE_INTEGRATION=1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, nil)
}

// StartReplica starts a redis-server that replicates primary (a read-only
// replica, as REPLICAOF makes it) and waits until its link to the primary is
// up, so that it holds the primary's data, and the primary counts it as
// online, so that WAIT counts its acknowledgements (after a diskless sync,
// only once the replica's first one, up to a second later, has arrived).
func StartReplica(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	ctx := context.Background()
	// The primary would otherwise wait five seconds for more replicas before
	// it streams its data (repl-diskless-sync-delay).
	if err := primary.NewClient().ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		tb.Fatalf("redisserver: configuring primary %s: %v", primary.Addr, err)
	}
	s := start(tb, func(*Server) []string { return []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)} })
	c, pc := s.NewClient(), primary.NewClient()
	online := "port=" + strconv.Itoa(s.Port) + ",state=online"
	deadline := time.Now().Add(startTimeout)
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			var onPrimary string
			if onPrimary, err = pc.Info(ctx, "replication").Result(); err == nil && strings.Contains(onPrimary, online) {
				return s
			}
			info += onPrimary
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redisserver: replica %s did not connect to primary %s: %v\n%s", s.Addr, primary.Addr, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start starts a server with the arguments args returns, called for each
// port tried once s.Port is set.
func start(tb testing.TB, args func(s *Server) []string) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		testenv.SkipUnlessRequired(tb, err)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(s.cleanup)

	// Another process may take the port between our probe and the server's
	// bind; try a few ports before giving up.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redisserver: finding a free port: %v", err)
		}
		s.Port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if args != nil {
			s.extra = args(s)
		}
		if lastErr = s.launch(); lastErr == nil {
			return s
		}
	}
	tb.Fatalf("redisserver: starting %s: %v", bin, lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts the process on s.Port and waits until it answers PING.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts++
	logPath := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.starts))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()

	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	args = append(args, s.extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.proc, s.exited, s.frozen = cmd, exited, false

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited during startup (%v):\n%s", cmd.ProcessState, readLog(logPath))
		default:
		}
		if ping(s.Addr) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server did not answer PING on %s within %v:\n%s", s.Addr, startTimeout, readLog(logPath))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// ping sends one PING over a fresh connection and expects PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("+PONG")) {
		return fmt.Errorf("PING: %q", bytes.TrimSpace(line))
	}
	return nil
}

// NewClient returns a go-redis client for the server, with go-redis's
// defaults except for the options optFns change. It is closed when the test
// ends.
func (s *Server) NewClient(optFns ...func(*redis.Options)) *redis.Client {
	opt := &redis.Options{Addr: s.Addr}
	for _, fn := range optFns {
		fn(opt)
	}
	c := redis.NewClient(opt)
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c
}

// Stop kills the server process, as a crash would, and waits until it has
// exited. Its data is lost (nothing is persisted). Stopping a stopped server
// does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.proc == nil {
		return
	}
	_ = s.proc.Process.Kill() // SIGKILL also ends a frozen (SIGSTOP) process
	<-s.exited
	s.proc, s.frozen = nil, false
}

// Restart stops the server and starts it again on the same port, empty: like
// a failover to a node that had no copy of the data, or a restart without
// persistence. Clients keep their address and reconnect.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	// The port was ours a moment ago; retry briefly in case the kernel has
	// not released it yet.
	var err error
	for range 50 {
		if err = s.launch(); err == nil {
			return
		}
		if !strings.Contains(err.Error(), "in use") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.tb.Fatalf("redisserver: restarting on %s: %v", s.Addr, err)
}

// Freeze suspends the server process (SIGSTOP): connections are accepted by
// the kernel but nothing is answered until Thaw, so clients see timeouts.
func (s *Server) Freeze() {
	s.signal(freezeSignal, true)
}

// Thaw resumes a server suspended by Freeze (SIGCONT).
func (s *Server) Thaw() {
	s.signal(thawSignal, false)
}

func (s *Server) signal(sig os.Signal, frozen bool) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig == nil {
		s.tb.Fatal("redisserver: Freeze and Thaw need SIGSTOP and SIGCONT, which this system lacks")
	}
	if s.proc == nil {
		s.tb.Fatalf("redisserver: %v sent to a stopped server", sig)
	}
	if err := s.proc.Process.Signal(sig); err != nil {
		s.tb.Fatalf("redisserver: sending %v: %v", sig, err)
	}
	s.frozen = frozen
}

func (s *Server) cleanup() {
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	s.Stop()
}
