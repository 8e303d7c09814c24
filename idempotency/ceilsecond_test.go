package idempotency

import (
	"testing"
	"time"
)

// TestCeilSecond checks ceilSecond against its definition through
// Truncate, field for field: the wall time, the monotonic reading (kept
// only when t is already on a whole second) and the location.
func TestCeilSecond(t *testing.T) {
	want := func(t time.Time) time.Time {
		if r := t.Truncate(time.Second); !r.Equal(t) {
			return r.Add(time.Second)
		}
		return t
	}
	now := time.Now()
	whole := now.Truncate(time.Second)
	times := []time.Time{
		now, now.Round(0), whole, whole.Add(time.Nanosecond), whole.Add(-time.Nanosecond),
		whole.Add(time.Second - time.Nanosecond), now.Add(time.Hour).In(time.FixedZone("x", -3*3600-1800)),
		time.Date(1969, 12, 31, 23, 59, 59, 500, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), {},
	}
	for i := range 10000 {
		times = append(times, now.Add(time.Duration(i)*7919*time.Microsecond+time.Duration(i%3)))
	}
	for _, tm := range times {
		if got, want := ceilSecond(tm), want(tm); got != want {
			t.Errorf("ceilSecond(%v) = %v, want %v", tm, got, want)
		}
	}
}
