package dynamodb_test

import (
	"runtime/metrics"
	"testing"

	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
)

// goroutinesCreated returns how many goroutines the program has started,
// or false where the runtime does not count them (before Go 1.26).
func goroutinesCreated() (uint64, bool) {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// TestGoroutinesPerCall: a call through Wrap starts no goroutine of its
// own, and none in the SDK's HTTP transport (a context the transport does
// not know starts a watcher per request): at most 0.1 per call, over
// pooled connections, on a first call and on a replay. It counts
// goroutines, not time.
func TestGoroutinesPerCall(t *testing.T) {
	if _, ok := goroutinesCreated(); !ok {
		t.Skip("the runtime does not count the goroutines it creates (Go 1.26 does)")
	}
	srv := server{dynamotest.Dynalite.Shared(t)}
	_, store, _ := srv.setup(t)
	h := &handler{}
	pay := wrap(t, h.charge, store)
	done := newPayment()
	for range 5 { // connections, and the replay's record
		if _, err := pay(t.Context(), newPayment()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pay(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	const calls = 100
	for _, path := range []struct {
		name    string
		payment func() payment
	}{
		{"first call", newPayment},
		{"replay", func() payment { return done }},
	} {
		before, _ := goroutinesCreated()
		for range calls {
			if _, err := pay(t.Context(), path.payment()); err != nil {
				t.Fatal(err)
			}
		}
		after, _ := goroutinesCreated()
		perCall := float64(after-before) / calls
		t.Logf("%s: %.2f goroutines started per call", path.name, perCall)
		if perCall > 0.1 {
			t.Errorf("%s: %.2f goroutines started per call, want at most 0.1", path.name, perCall)
		}
	}
}
