//go:build unix && !linux

package main

import "syscall"

// processCPU returns the CPU time (user and system) the process has used,
// in nanoseconds, every thread included.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// threadsCPU is processCPU where threads' clocks are not read.
func threadsCPU() int64 { return processCPU() }
