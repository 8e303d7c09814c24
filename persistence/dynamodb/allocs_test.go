//go:build !race

package dynamodb_test

import (
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// TestRequestAllocations holds what the store allocates to build a first
// call's requests, apart from the SDK (see BenchmarkRequest), to a
// ceiling: 16 for the reservation's PutItem, 14 for the completion's
// UpdateItem. Most are the attribute values and their maps, which the SDK
// takes as they are.
func TestRequestAllocations(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	rec, done := benchRecords(now)
	s, err := dynamodb.New(&requestClient{}, "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, c := range []struct {
		name string
		max  float64
		op   func() error
	}{
		{"PutItem", 16, func() error { return s.Put(ctx, rec, now) }},
		{"UpdateItem", 14, func() error { return s.Update(ctx, done) }},
	} {
		allocs := testing.AllocsPerRun(1000, func() {
			if err := c.op(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > c.max {
			t.Errorf("%s: %.1f allocations, want at most %.0f", c.name, allocs, c.max)
		}
	}
}
