// Package cpubench measures the CPU time of the operations of a benchmark,
// for the stores' floor benchmarks: what a call costs the process, apart
// from the time it waits on its server.
package cpubench

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU returns the CPU time, user and system, that this process has
// used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Loop runs op once per iteration of b, each after prepare (when not nil),
// and returns the process's CPU time during the ops, prepare's left out,
// and how many ops ran.
func Loop(b *testing.B, op, prepare func()) (cpu time.Duration, n int) {
	b.Helper()
	for b.Loop() {
		if prepare != nil {
			prepare()
		}
		start := ProcessCPU()
		op()
		cpu += ProcessCPU() - start
		n++
	}
	return cpu, n
}
