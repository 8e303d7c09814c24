//go:build !linux

package rie

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// platformSupported reports that the emulator runs Linux executables, and
// is only supported here on Linux.
func platformSupported() error {
	return fmt.Errorf("%w: the emulator runs Linux functions; this is %s", ErrUnavailable, runtime.GOOS)
}

func setProcAttrs(*exec.Cmd, syscall.Signal) {}

func terminate(cmd *exec.Cmd) { kill(cmd) }

func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func checkSandbox(context.Context) error { return platformSupported() }

func sandboxCommand(stage, rie, bootstrap string, args []string) (*exec.Cmd, error) {
	return nil, platformSupported()
}
