package redisserver

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the server if the test process
// dies without running its cleanups (a timeout panic, a SIGKILL).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
