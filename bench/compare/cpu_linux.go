//go:build linux

package main

import (
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// threadsCPU returns the CPU time (user and system) the process has used,
// in nanoseconds, every thread included: the sum of its threads' CPU
// clocks. The interleaved loops read it around turns of a few
// milliseconds; it costs some microseconds (a listing of /proc/self/task
// and a system call per thread), which the bare handler's turns pay too.
//
// Not getrusage: it adds up each thread's run time as of that thread's
// last scheduler tick (4 ms with HZ=250), but for the calling thread's, so
// that the time of a thread running on another core at the moment of the
// reading shows up only later, and a turn of a few milliseconds is
// charged for its neighbours' work. (processCPU, getrusage, serves loops
// of one side, where that lag stays within the loop.) A thread's own clock
// (CLOCK_THREAD_CPUTIME_ID of its thread ID) includes the time it has run
// since then: the kernel brings it up to date when it is read.
//
// A thread that has exited counts with the time it had when last read.
func threadsCPU() int64 {
	threads.mu.Lock()
	defer threads.mu.Unlock()
	if threads.last == nil {
		threads.last = map[int]int64{}
	}
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ns, ok := threadCPU(tid)
		if !ok {
			continue // exited since the listing
		}
		if prev := threads.last[tid]; ns > prev {
			threads.total += ns - prev
		}
		threads.last[tid] = ns
	}
	return threads.total
}

var threads struct {
	mu    sync.Mutex
	last  map[int]int64 // each thread's CPU time when last read
	total int64
}

// threadCPU reads the CPU clock of thread tid of this process
// (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) in the kernel's terms).
func threadCPU(tid int) (int64, bool) {
	clock := int32(^tid<<3 | 6) // per thread (4), scheduler's run time (2)
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return ts.Nano(), true
}

// processCPU returns the CPU time (user and system) the process has used,
// in nanoseconds, every thread included, as getrusage counts it.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
