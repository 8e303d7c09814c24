//go:build race

package otelidempotency_test

// raceEnabled reports whether the race detector is on: its
// instrumentation allocates, so allocation bounds are not checked.
const raceEnabled = true
