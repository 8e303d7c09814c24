//go:build unix

package redisserver

import (
	"os"
	"syscall"
)

var (
	freezeSignal os.Signal = syscall.SIGSTOP
	thawSignal   os.Signal = syscall.SIGCONT
)
