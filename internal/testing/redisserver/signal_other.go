//go:build !unix

package redisserver

import "os"

// Without SIGSTOP and SIGCONT, Freeze and Thaw fail the test.
var (
	freezeSignal os.Signal
	thawSignal   os.Signal
)
