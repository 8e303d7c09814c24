//go:build !linux

package redisserver

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal: a test process that dies without its cleanups leaves the server
// running.
func setParentDeathSignal(*exec.Cmd) {}
