//go:build !race

package jmespath

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
