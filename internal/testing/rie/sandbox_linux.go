package rie

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The multi-concurrency mode only runs a bootstrap found at one of the
// paths Lambda uses (/var/runtime/bootstrap, /var/task/bootstrap,
// /opt/bootstrap), with /var/task as its working directory. It runs here
// in private mount and PID namespaces, made by util-linux unshare, where a
// staging directory is mounted over /var:
//
//	stage/task/bootstrap   the function's binary, bind-mounted
//	stage/aws-lambda-rie   the emulator, bind-mounted
//
// Both are bind-mounted before /var is replaced (recursively, so that the
// file mounts come along), so that nothing has to be copied and paths
// under /var keep working. The emulator is the PID namespace's init: when
// it exits, the kernel kills the runtime process with it.
const sandboxScript = `set -e
stage=$1 bootstrap=$2 rie=$3
shift 3
mount --bind "$bootstrap" "$stage/task/bootstrap"
mount --bind "$rie" "$stage/aws-lambda-rie"
mount --rbind "$stage" /var
exec /var/aws-lambda-rie "$@"
`

// unshareArgs are the arguments of unshare that make the namespaces.
var unshareArgs = []string{"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child"}

// sandboxCommand returns the command that runs the emulator, with args,
// on bootstrap in the namespaces, with stage as the staging directory.
func sandboxCommand(stage, rie, bootstrap string, args []string) (*exec.Cmd, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("%w: the multi-concurrency mode needs util-linux unshare: %v", ErrUnavailable, err)
	}
	// The emulator runs the function as Lambda's sandbox user (993:990),
	// which must be able to reach /var/task/bootstrap.
	if err := os.Chmod(stage, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(stage, "task"), 0o755); err != nil {
		return nil, err
	}
	for _, f := range []string{filepath.Join(stage, "task", "bootstrap"), filepath.Join(stage, "aws-lambda-rie")} {
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			return nil, err
		}
	}
	cmdArgs := append(slices.Clone(unshareArgs), "--", "/bin/sh", "-c", sandboxScript, "sh", stage, bootstrap, rie)
	cmd := exec.Command(unshare, append(cmdArgs, args...)...)
	// The emulator runs /var/task/bootstrap in /var/task whatever its own
	// working directory is.
	cmd.Dir = stage
	// unshare passes SIGTERM on to the emulator and waits for it; when this
	// process dies, unshare must die at once, which kills the emulator
	// (--kill-child) and with it the namespace.
	setProcAttrs(cmd, syscall.SIGKILL)
	return cmd, nil
}

var sandbox struct {
	once sync.Once
	err  error
}

// checkSandbox tells, once per process, whether the namespaces of the
// multi-concurrency mode can be made here, by making them.
func checkSandbox(ctx context.Context) error {
	sandbox.once.Do(func() {
		if os.Geteuid() != 0 {
			sandbox.err = fmt.Errorf("%w: the multi-concurrency mode runs the function as Lambda's sandbox user (uid 993), "+
				"and here in private mount and PID namespaces: it needs root", ErrUnavailable)
			return
		}
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			sandbox.err = fmt.Errorf("%w: the multi-concurrency mode needs util-linux unshare: %v", ErrUnavailable, err)
			return
		}
		dir, err := os.MkdirTemp("", "rie-sandbox-check-")
		if err != nil {
			sandbox.err = err
			return
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		args := append(slices.Clone(unshareArgs), "--", "/bin/sh", "-c", `mount --rbind "$1" /var && test -d /var/task`, "sh", dir)
		if err := os.Mkdir(filepath.Join(dir, "task"), 0o755); err != nil {
			sandbox.err = err
			return
		}
		if out, err := exec.CommandContext(ctx, unshare, args...).CombinedOutput(); err != nil {
			sandbox.err = fmt.Errorf("%w: the multi-concurrency mode runs the emulator in private mount and PID namespaces, which cannot be made here (%v: %s); "+
				"unshare --mount --pid needs CAP_SYS_ADMIN", ErrUnavailable, err, strings.TrimSpace(string(bytes.TrimSpace(out))))
		}
	})
	return sandbox.err
}
