//go:build unix

package pgserver

import (
	"os/exec"
	"syscall"
)

// setCredential makes cmd run as cred's user, with no supplementary
// groups, unless cred is nil.
func setCredential(cmd *exec.Cmd, cred *credential) {
	if cred == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: cred.uid, Gid: cred.gid, Groups: []uint32{}}
}

// setProcAttr starts the server in a process group of its own, which kill
// reaches with its backends, and has the kernel kill it if the test
// process dies without running its cleanups (where the kernel can).
func setProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setParentDeathSignal(cmd.SysProcAttr)
}

// quit asks the postmaster for an immediate shutdown: it ends its
// backends and exits without a checkpoint.
func quit(cmd *exec.Cmd) { _ = cmd.Process.Signal(syscall.SIGQUIT) }

// kill kills the server's process group.
func kill(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}

// signalGroup stops (SIGSTOP) or resumes (SIGCONT) the server's process
// group: the postmaster and every process it started.
func signalGroup(cmd *exec.Cmd, stop bool) error {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}
