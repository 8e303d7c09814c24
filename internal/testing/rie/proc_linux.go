package rie

import (
	"os/exec"
	"syscall"
)

func platformSupported() error { return nil }

// setProcAttrs starts cmd in a process group of its own, so that terminate
// and kill reach what it starts in that group, and makes the kernel send
// cmd deathSignal if this process dies without stopping it (a test
// binary's timeout panic, a SIGKILL).
func setProcAttrs(cmd *exec.Cmd, deathSignal syscall.Signal) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
}

// terminate asks cmd's process group to exit.
func terminate(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
}

// kill kills cmd's process group.
func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
}
