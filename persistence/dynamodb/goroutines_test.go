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

// BenchmarkGoroutinesPerCall reports the goroutines a call through Wrap
// starts (goroutines/op), over pooled connections to dynalite, on a first
// call and on a replay: a completion context the HTTP transport does not
// know would start a watcher per request. The count is the whole
// process's, so other tests running alongside inflate it: run it alone.
//
//	go test -run '^$' -bench GoroutinesPerCall ./persistence/dynamodb/
func BenchmarkGoroutinesPerCall(b *testing.B) {
	if _, ok := goroutinesCreated(); !ok {
		b.Skip("the runtime does not count the goroutines it creates (Go 1.26 does)")
	}
	srv := server{dynamotest.Dynalite.Shared(b)}
	_, store, _ := srv.setup(b)
	h := &handler{}
	pay := wrap(b, h.charge, store)
	done := newPayment()
	for _, p := range []payment{newPayment(), newPayment(), done} { // connections, and the replay's record
		if _, err := pay(b.Context(), p); err != nil {
			b.Fatal(err)
		}
	}
	for _, path := range []struct {
		name    string
		payment func() payment
	}{
		{"FirstCall", newPayment},
		{"Replay", func() payment { return done }},
	} {
		b.Run(path.name, func(b *testing.B) {
			before, _ := goroutinesCreated()
			calls := 0
			for b.Loop() {
				calls++
				if _, err := pay(b.Context(), path.payment()); err != nil {
					b.Fatal(err)
				}
			}
			after, _ := goroutinesCreated()
			b.ReportMetric(float64(after-before)/float64(calls), "goroutines/op")
		})
	}
}
