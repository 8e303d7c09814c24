//go:build race

package canonical_test

// raceEnabled reports whether the race detector is on: its
// instrumentation allocates, and sync.Pool drops some of what it is
// given, so allocation bounds are not checked.
const raceEnabled = true
