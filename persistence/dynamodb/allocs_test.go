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

// TestNewAllocations holds what building a store allocates (19), at a
// function's cold start, to a ceiling: its conditions and their names,
// not the update expressions of every combination of attributes, which
// are built as writes first need them (building all 256 of them took
// 6,400 allocations and 0.6 ms).
func TestNewAllocations(t *testing.T) {
	c := &requestClient{}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := dynamodb.New(c, "idempotency"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 25 {
		t.Errorf("dynamodb.New: %.0f allocations, want at most 25", allocs)
	}
	t.Logf("dynamodb.New: %.0f allocations", allocs)
}
