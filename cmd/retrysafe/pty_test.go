//go:build linux || darwin

package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

// terminal is the command run as a process of its own, with a
// pseudo-terminal for stdin, stdout and stderr.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed once the output has been read to its end
}

// onTerminal starts the command with args (the test binary runs it, see
// TestMain), on a terminal of 120 columns.
func onTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	return onTerminalOf(t, 120, args...)
}

// onTerminalOf starts the command with args on a terminal of cols
// columns.
func onTerminalOf(t *testing.T, cols int, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: uint16(cols)})
	require.NoError(t, err)
	term := &terminal{t: t, cmd: cmd, ptmx: ptmx, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil { // EIO once the command has exited
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = ptmx.Close()
	})
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// waitFor waits until the output contains s. The bound only keeps a
// broken command from hanging the test.
func (term *terminal) waitFor(s string) {
	term.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(term.output(), s) {
		if time.Now().After(deadline) {
			term.t.Fatalf("the command did not write %q; it wrote:\n%s", s, term.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// interrupt types Ctrl-C, which the terminal turns into SIGINT.
func (term *terminal) interrupt() {
	term.t.Helper()
	_, err := io.WriteString(term.ptmx, "\x03")
	require.NoError(term.t, err)
}

func (term *terminal) typeLine(s string) {
	term.t.Helper()
	_, err := io.WriteString(term.ptmx, s+"\n")
	require.NoError(term.t, err)
}

// exit waits for the command to end and returns its exit code and all it
// wrote.
func (term *terminal) exit() (int, string) {
	term.t.Helper()
	err := term.cmd.Wait()
	<-term.done
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), term.output()
	}
	require.NoError(term.t, err)
	return 0, term.output()
}

// onEachTable runs test against a DynamoDB table and a PostgreSQL table.
func onEachTable(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("DynamoDB", func(t *testing.T) { test(t, dynamoFixture(t)) })
	t.Run("PostgreSQL", func(t *testing.T) { test(t, postgresFixture(t)) })
}

func TestReleaseAsksOnATerminal(t *testing.T) {
	onEachTable(t, testReleaseAsksOnATerminal)
}

func testReleaseAsksOnATerminal(t *testing.T, f *fixture) {
	held := holdKey(t, f, time.Now().Add(time.Minute))
	release := f.with("release", held.key)

	t.Run("declined", func(t *testing.T) {
		term := onTerminal(t, release...)
		term.waitFor("[y/N] ")
		shown := term.output()
		require.Contains(t, shown, held.key)
		require.Contains(t, shown, "in progress")
		require.Contains(t, shown, "the next retry with this key runs the handler again")
		term.typeLine("n")
		code, out := term.exit()
		require.Equal(t, exitRefused, code, out)
		require.Contains(t, out, "not released")
		require.Equal(t, "in_progress", getRecord(t, f, held.key).State)
	})

	t.Run("the record changes before the answer", func(t *testing.T) {
		term := onTerminal(t, release...)
		term.waitFor("[y/N] ")
		require.NoError(t, held.finish()) // the call completes meanwhile
		term.typeLine("y")
		code, out := term.exit()
		require.Equal(t, exitRefused, code, out)
		require.Contains(t, out, "the record changed since it was read")
		require.Equal(t, "completed", getRecord(t, f, held.key).State, "the completion is kept")
	})

	t.Run("confirmed", func(t *testing.T) {
		term := onTerminal(t, append(release, "--force")...)
		term.waitFor("[y/N] ")
		term.typeLine("yes")
		code, out := term.exit()
		require.Equal(t, exitOK, code, out)
		require.Contains(t, out, "released "+held.key)
		r := runCmd(t, f.with("get", held.key)...)
		require.Equal(t, exitNotFound, r.code, r.stderr)
	})
}

func TestProgressOnATerminal(t *testing.T) {
	onEachTable(t, func(t *testing.T, f *fixture) {
		putGolden(t, f)
		term := onTerminal(t, f.with("stats", "--page-size", "2")...)
		code, out := term.exit()
		require.Equal(t, exitOK, code, out)
		require.Regexp(t, `scanning: 6 records in \d pages, `+f.shown, out)
		require.Contains(t, out, "total        7")
	})
}

// sweep shows its progress on a terminal, and what it deleted.
func TestSweepOnATerminal(t *testing.T) {
	f := postgresFixture(t)
	putExpired(t, f, 25)
	term := onTerminal(t, f.with("sweep", "--batch-size", "10", "--rate", "0")...)
	code, out := term.exit()
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "sweeping: 25 records deleted in 3 batches, PostgreSQL table")
	require.Regexp(t, `(?m)^deleted 25 expired records from PostgreSQL table "idempotency" in database "\w+" at 127\.0\.0\.1:\d+, in 3 batches of at most 10\r?$`,
		strings.Join(screenLines(out), "\n"))
}
