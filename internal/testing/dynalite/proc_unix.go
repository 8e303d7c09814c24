//go:build unix

package dynalite

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts cmd in a process group of its own, so that
// killProcessGroup reaches anything it starts.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
