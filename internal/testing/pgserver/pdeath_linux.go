package pgserver

import "syscall"

// setParentDeathSignal makes the kernel kill the postmaster if the test
// process dies without running its cleanups (a timeout panic, a SIGKILL);
// its backends then exit by themselves. Go sets the signal after it
// changes the credentials, which would otherwise clear it.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
