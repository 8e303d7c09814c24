package epoch

import (
	"testing"
	"time"
)

// A time rounds up to the next whole unit unless it is one already, before
// the epoch as after it.
func TestCeil(t *testing.T) {
	for _, tc := range []struct {
		t             time.Time
		seconds, msec int64
	}{
		{time.Unix(10, 0), 10, 10_000},
		{time.Unix(10, 1), 11, 10_001},
		{time.Unix(10, int64(time.Millisecond)), 11, 10_001},
		{time.Unix(10, int64(999*time.Millisecond)+1), 11, 11_000},
		{time.Unix(-10, 0), -10, -10_000},
		{time.Unix(-10, 1), -9, -9_999},
	} {
		if got := CeilSeconds(tc.t); got != tc.seconds {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tc.t, got, tc.seconds)
		}
		if got := CeilMillis(tc.t); got != tc.msec {
			t.Errorf("CeilMillis(%v) = %d, want %d", tc.t, got, tc.msec)
		}
	}
}

// FuzzCeil checks the rounding the stores' conditions rely on: for a
// stored time a in whole seconds (milliseconds), a is before now exactly
// when a < CeilSeconds(now) (CeilMillis(now)).
func FuzzCeil(f *testing.F) {
	f.Add(int64(1_800_000_000_000), int64(1_800_000_000_000_000_000))
	f.Add(int64(1_800_000_000_000), int64(1_800_000_000_000_000_001))
	f.Add(int64(1_800_000_000_001), int64(1_800_000_000_000_999_999))
	f.Add(int64(1_800_000_000), int64(1_800_000_000_999_999_999))
	f.Add(int64(-1), int64(-1))
	f.Add(int64(-1), int64(-1_000_000))
	f.Fuzz(func(t *testing.T, stored, nowNanos int64) {
		if stored < -1e15 || stored > 1e15 {
			t.Skip()
		}
		now := time.Unix(0, nowNanos)
		if before, less := time.UnixMilli(stored).Before(now), stored < CeilMillis(now); before != less {
			t.Fatalf("stored %d ms, now %v (%d ns): Before = %v, stored < CeilMillis(now) = %d: %v",
				stored, now, nowNanos, before, CeilMillis(now), less)
		}
		if before, less := time.Unix(stored, 0).Before(now), stored < CeilSeconds(now); before != less {
			t.Fatalf("stored %d s, now %v (%d ns): Before = %v, stored < CeilSeconds(now) = %d: %v",
				stored, now, nowNanos, before, CeilSeconds(now), less)
		}
	})
}
