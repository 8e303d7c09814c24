//go:build unix && !linux

package pgserver

import "syscall"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal: a test process that dies without its cleanups leaves the server
// running.
func setParentDeathSignal(*syscall.SysProcAttr) {}
