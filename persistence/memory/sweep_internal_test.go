package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// TestSweepBacksOffWhileNothingExpires: sweeps that find every record live
// space out to sweepEveryMax reservations, and the first dead record found
// brings them back to sweepEveryMin.
func TestSweepBacksOffWhileNothingExpires(t *testing.T) {
	s := New()
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	put := func(key string, at, expires time.Time) {
		t.Helper()
		rec := &persistence.Record{Key: key, Status: persistence.StatusCompleted, ExpiresAt: expires}
		if err := s.Put(ctx, rec, at); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 * sweepEveryMax {
		put(fmt.Sprint("short", i), now, now.Add(time.Second))
	}
	if s.every != sweepEveryMax {
		t.Fatalf("after sweeps that found nothing dead the interval is %d, want %d", s.every, sweepEveryMax)
	}
	later := now.Add(time.Minute)
	for i := range sweepEveryMax {
		put(fmt.Sprint("long", i), later, later.Add(time.Hour))
	}
	if s.every != sweepEveryMin {
		t.Fatalf("after a sweep that found dead records the interval is %d, want %d", s.every, sweepEveryMin)
	}
}
