//go:build unix

package pgserver

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// signalServer stops (SIGSTOP) or resumes (SIGCONT) the postmaster and
// every process it started. Those are not in its process group: each
// makes itself a session leader as it starts (InitPostmasterChild), so
// that the postmaster can signal its children. They are found in /proc as
// the processes whose parent is the postmaster; the postmaster is stopped
// first, so that it starts none while they are signalled. Without /proc
// only the postmaster's group is signalled.
func signalServer(cmd *exec.Cmd, stop bool) error {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	pid := cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil {
		return err
	}
	for _, child := range children(pid) {
		// A child that has exited since is no error.
		if err := syscall.Kill(child, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

// children returns the processes whose parent is pid, from /proc, or none
// where there is no /proc.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
