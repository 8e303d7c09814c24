package dynamodb_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
)

// BenchmarkBurst measures idempotency.WithWait over this store against
// dynalite, with a handler that takes 50 ms.
//
//	go test -run '^$' -bench Burst -benchtime 20x ./persistence/dynamodb/
//
// OneProcess: 64 concurrent calls with one key in one process share one
// reservation: the first runs the handler, the others wait in memory.
// Reported per burst: handler runs, store requests, and the waiters' time
// to answer (p50, p99), next to the handler's own duration.
//
// TwoProcesses: a call holds the key in one process (one store client), a
// duplicate in another (another client, no memory shared) polls the store
// until the first completes. Reported: the waiter's store requests, and
// the time until it has its answer, from the duplicate's arrival, 10 ms
// after the first call started.
func BenchmarkBurst(b *testing.B) {
	const handlerTime = 50 * time.Millisecond
	srv := server{dynamotest.Dynalite.Shared(b)}
	name := srv.table(b)
	var runs sync.Map
	handler := func(_ context.Context, in map[string]string) (string, error) {
		time.Sleep(handlerTime)
		n, _ := runs.LoadOrStore(in["id"], new(int))
		*(n.(*int))++
		return "done " + in["id"], nil
	}
	wrap := func(b *testing.B, c *dynalite.Counter) func(context.Context, map[string]string) (string, error) {
		store := newStore(b, srv.NewClient(c.Register), name)
		return idempotency.Must(idempotency.Wrap(handler, store, idempotency.WithKeyPrefix("burst"),
			idempotency.WithWait(5*time.Second), idempotency.WithKey("id")))
	}

	b.Run("OneProcess", func(b *testing.B) {
		var counter dynalite.Counter
		h := wrap(b, &counter)
		var waits []time.Duration
		var mu sync.Mutex
		bursts := 0
		for i := 0; b.Loop(); i++ {
			in := map[string]string{"id": fmt.Sprintf("one-%d-%d", time.Now().UnixNano(), i)}
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					start := time.Now()
					if _, err := h(b.Context(), in); err != nil {
						b.Error(err)
					}
					mu.Lock()
					waits = append(waits, time.Since(start))
					mu.Unlock()
				})
			}
			wg.Wait()
			bursts++
		}
		reportRuns(b, &runs, bursts)
		b.ReportMetric(float64(counter.Calls())/float64(bursts), "requests/burst")
		reportQuantiles(b, waits, "answer")
		b.ReportMetric(float64(handlerTime.Milliseconds()), "handler-ms")
	})

	b.Run("TwoProcesses", func(b *testing.B) {
		var here, there dynalite.Counter
		first, second := wrap(b, &here), wrap(b, &there)
		var waits []time.Duration
		pairs := 0
		for i := 0; b.Loop(); i++ {
			in := map[string]string{"id": fmt.Sprintf("two-%d-%d", time.Now().UnixNano(), i)}
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, err := first(b.Context(), in); err != nil {
					b.Error(err)
				}
			})
			time.Sleep(10 * time.Millisecond)
			start := time.Now()
			if _, err := second(b.Context(), in); err != nil {
				b.Error(err)
			}
			waits = append(waits, time.Since(start))
			wg.Wait()
			pairs++
		}
		reportRuns(b, &runs, pairs)
		b.ReportMetric(float64(there.Calls())/float64(pairs), "waiter-requests/op")
		reportQuantiles(b, waits, "answer")
		b.ReportMetric(float64(handlerTime.Milliseconds()), "handler-ms")
	})
}

// reportRuns reports the handler runs per burst, and clears them.
func reportRuns(b *testing.B, runs *sync.Map, bursts int) {
	total := 0
	runs.Range(func(k, v any) bool {
		total += *(v.(*int))
		runs.Delete(k)
		return true
	})
	b.ReportMetric(float64(total)/float64(bursts), "runs/burst")
}

func reportQuantiles(b *testing.B, ds []time.Duration, name string) {
	slices.Sort(ds)
	q := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
}
