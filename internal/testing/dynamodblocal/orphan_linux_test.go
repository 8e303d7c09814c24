package dynamodblocal_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

const orphanChildEnv = "DYNAMODBLOCAL_TEST_ORPHAN_CHILD"

// A test binary that dies without its cleanups (a timeout panic, a SIGKILL)
// leaves no Java process behind: the launcher exits when its standard input
// closes.
func TestNoJavaOutlivesTheTestBinary(t *testing.T) {
	if os.Getenv(orphanChildEnv) == "1" {
		srv, err := dynamodblocal.StartContext(context.Background())
		switch {
		case errors.Is(err, dynamodblocal.ErrUnavailable):
			fmt.Printf("unavailable %v\n", err)
		case err != nil:
			t.Fatal(err)
		default:
			fmt.Printf("java pid %d\n", srv.Pid())
			select {} // until killed
		}
		return
	}

	child := exec.Command(os.Args[0], "-test.run=^TestNoJavaOutlivesTheTestBinary$")
	// The child cannot remove the launcher's directory: it goes to a
	// directory of this test's.
	child.Env = append(os.Environ(), orphanChildEnv+"=1", "TMPDIR="+t.TempDir())
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	child.Stderr = &stderr
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	pid := 0
	sc := bufio.NewScanner(out)
	var lines []string
	for pid == 0 && sc.Scan() {
		lines = append(lines, sc.Text())
		if p, ok := strings.CutPrefix(sc.Text(), "java pid "); ok {
			pid, err = strconv.Atoi(p)
			require.NoError(t, err)
		}
		if msg, ok := strings.CutPrefix(sc.Text(), "unavailable "); ok {
			testenv.SkipUnlessRequired(t, errors.New(msg))
		}
	}
	if pid == 0 {
		_ = child.Wait() // for stderr
		t.Fatalf("the child did not start a server:\n%s\n%s", strings.Join(lines, "\n"), stderr.String())
	}
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	require.True(t, alive(pid), "java runs while the child does")

	require.NoError(t, child.Process.Kill())
	_ = child.Wait()

	// Bounded only so that a surviving process fails the test instead of
	// hanging it.
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("java (pid %d) still runs after its parent died", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}
