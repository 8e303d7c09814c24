//go:build linux

package main

import (
	"syscall"
	"testing"
	"time"
)

// threadsCPU counts the work of every thread, as getrusage does: a busy
// goroutine on another thread shows in it.
func TestCPUTimeCountsEveryThread(t *testing.T) {
	rusage := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	c0, r0 := threadsCPU(), rusage()
	done := make(chan struct{})
	go func() {
		// Busy until the process has used 100ms of CPU, by getrusage: on a
		// busy machine that takes longer than 100ms of wall time.
		defer close(done)
		for rusage()-r0 < int64(100*time.Millisecond) {
		}
	}()
	<-done
	c, r := threadsCPU()-c0, rusage()-r0
	if c < r/2 {
		t.Errorf("threadsCPU counted %v of a goroutine busy for %v of CPU (getrusage)", time.Duration(c), time.Duration(r))
	}
	if c2 := threadsCPU(); c2 < c0+c {
		t.Errorf("threadsCPU went back: %d after %d", c2, c0+c)
	}
}
