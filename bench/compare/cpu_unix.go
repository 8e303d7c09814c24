//go:build unix && !linux

package main

import "syscall"

// cpuTime returns the CPU time (user and system) the process has used, in
// nanoseconds, every thread included.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
