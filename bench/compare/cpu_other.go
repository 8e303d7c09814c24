//go:build !unix

package main

// processCPU is not measured on this platform: the CPU columns read zero.
func processCPU() int64 { return 0 }

// threadsCPU is not measured on this platform either.
func threadsCPU() int64 { return 0 }
