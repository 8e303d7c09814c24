package batch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// TestParallelism: WithParallelism(n) runs n records at once, never more.
// The first n records wait for each other, so the test cannot pass unless
// n run together (and would time out, not hang, if they did not).
func TestParallelism(t *testing.T) {
	const n = 4
	h := sqsHarness(false)
	rc := &recorder{}
	var inside, most atomic.Int32
	arrived := make(chan struct{})
	var once sync.Once
	rc.hook = func(ctx context.Context, _ run) {
		now := inside.Add(1)
		defer inside.Add(-1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		if now == n {
			once.Do(func() { close(arrived) })
		}
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Errorf("%d records never ran at once", n)
		}
	}
	deliver := h.build(t, rc, memory.New(), idempotency.WithKey(h.key), batch.WithParallelism(n))
	var records []spec
	for i := range 3 * n {
		records = append(records, spec{n: i, order: fmt.Sprintf("o-%d", i)})
	}
	failed, err := deliver(t.Context(), records)
	require.NoError(t, err)
	assert.Empty(t, failed)
	assert.Len(t, rc.takeRuns(), 3*n)
	assert.EqualValues(t, n, most.Load(), "never more than n at once")
}

// TestParallelGroups: with parallelism, each group still runs in batch
// order, one record at a time, and the failures are those of a sequential
// run.
func TestParallelGroups(t *testing.T) {
	for _, h := range harnesses() {
		if !h.ordered {
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			var records []spec
			for i := range 60 {
				g := fmt.Sprintf("G%d", i%7)
				order := fmt.Sprintf("o-%d", i)
				if i == 15 || i == 23 || i == 40 {
					order = fmt.Sprintf("fail-%d", i)
				}
				records = append(records, spec{n: i, order: order, group: g})
			}

			sequential := &recorder{}
			failedSeq, err := h.build(t, sequential, memory.New(), idempotency.WithKey(h.key))(t.Context(), records)
			require.NoError(t, err)

			rc := &recorder{}
			var mu sync.Mutex
			busy := map[string]bool{}
			rc.hook = func(_ context.Context, r run) {
				mu.Lock()
				clash := busy[r.group]
				busy[r.group] = true
				mu.Unlock()
				assert.False(t, clash, "two records of group %s at once", r.group)
				time.Sleep(time.Millisecond) // let the other lanes interleave
				mu.Lock()
				busy[r.group] = false
				mu.Unlock()
			}
			failed, err := h.build(t, rc, memory.New(), idempotency.WithKey(h.key), batch.WithParallelism(4))(t.Context(), records)
			require.NoError(t, err)
			assert.Equal(t, failedSeq, failed, "the same failures, in batch order")
			runs := rc.takeRuns()
			assert.ElementsMatch(t, orders(sequential.takeRuns()), orders(runs))
			assertGroupOrder(t, runs, records)
		})
	}
}

// TestParallelDuplicates: on a standard queue, records with one key in a
// batch run one after the other, so the copies are skipped as completed
// instead of failing as in progress.
func TestParallelDuplicates(t *testing.T) {
	h := sqsHarness(false)
	rc := &recorder{}
	deliver := h.build(t, rc, memory.New(), idempotency.WithKey(h.key), batch.WithParallelism(8))
	var records []spec
	for i := range 40 {
		records = append(records, spec{n: i, order: fmt.Sprintf("o-%d", i%5)})
	}
	records = append(records, spec{n: 100, raw: "not json"}, spec{n: 101, raw: "not json"})
	failed, err := deliver(t.Context(), records)
	require.NoError(t, err)
	assert.Equal(t, ids(h, 100, 101), failed, "only the bad records fail")
	assert.ElementsMatch(t, []string{"o-0", "o-1", "o-2", "o-3", "o-4"}, orders(rc.takeRuns()))
}

// TestConcurrentInvocations: overlapping batches delivered at once to
// several invocations sharing a store, each with parallel records, then
// their failed records delivered again until none fail: every order runs
// exactly once. Run with -race.
func TestConcurrentInvocations(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			store := memory.New()
			rc := &recorder{}
			deliver := h.build(t, rc, store, idempotency.WithKey(h.key), batch.WithParallelism(3))

			// Batches of 10 overlapping by half: orders 0-9, 5-14, ... as
			// new records (a producer's re-sends), so only the order ID
			// recognises them.
			var batches [][]spec
			for b := range 6 {
				var records []spec
				for i := range 10 {
					o := b*5 + i
					records = append(records, spec{n: b*100 + i, order: fmt.Sprintf("o-%d", o), group: fmt.Sprintf("g-%d", o%3)})
				}
				batches = append(batches, records)
			}

			pending := make([][]spec, len(batches))
			var wg sync.WaitGroup
			for i, records := range batches {
				wg.Go(func() {
					failed, err := deliver(t.Context(), records)
					assert.NoError(t, err)
					pending[i] = pick(h, records, failed)
				})
			}
			wg.Wait()
			for round := 0; ; round++ {
				require.Less(t, round, 5, "failed records keep failing: %v", pending)
				var again []spec
				for _, p := range pending {
					again = append(again, p...)
				}
				if len(again) == 0 {
					break
				}
				pending = pending[:0]
				for i := 0; i < len(again); i += 10 {
					records := again[i:min(i+10, len(again))]
					failed, err := deliver(t.Context(), records)
					require.NoError(t, err)
					pending = append(pending, pick(h, records, failed))
				}
			}

			count := map[string]int{}
			for _, r := range rc.takeRuns() {
				count[r.order]++
			}
			assert.Len(t, count, 35)
			for order, n := range count {
				assert.Equal(t, 1, n, "order %s ran %d times", order, n)
			}
		})
	}
}

// pick returns the records whose identifiers are in failed.
func pick(h harness, records []spec, failed []string) []spec {
	var out []spec
	for _, s := range records {
		for _, id := range failed {
			if h.id(s.n) == id {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestParallelDuplicatesWait: records of different ordering groups run in
// parallel, so two that carry the same key meet while the first runs. With
// idempotency.WithWait the second waits for the first, in memory, and
// reports success: one run. Without it the second fails as in progress,
// and comes back.
func TestParallelDuplicatesWait(t *testing.T) {
	for _, wait := range []bool{true, false} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := kinesisHarness()
				release := make(chan struct{})
				rc := &recorder{hook: func(context.Context, run) { <-release }}
				opts := []idempotency.BatchOption{idempotency.WithKey(h.key), batch.WithParallelism(2)}
				if wait {
					opts = append(opts, idempotency.WithWait(time.Minute))
				}
				deliver := h.build(t, rc, memory.New(), opts...)
				// One order in two partitions: two lanes, one key.
				records := []spec{{n: 1, order: "o-1", group: "pk-a"}, {n: 2, order: "o-1", group: "pk-b"}}
				var failed []string
				done := make(chan struct{})
				go func() {
					defer close(done)
					var err error
					failed, err = deliver(t.Context(), records)
					assert.NoError(t, err)
				}()
				// Every goroutine is blocked: the first record in its
				// function, the second waiting for it, or done.
				synctest.Wait()
				close(release)
				<-done
				assert.Len(t, rc.takeRuns(), 1, "one run")
				if wait {
					assert.Empty(t, failed, "the duplicate waited, and succeeded")
				} else {
					assert.Len(t, failed, 1, "the duplicate failed as in progress")
				}
			})
		})
	}
}
