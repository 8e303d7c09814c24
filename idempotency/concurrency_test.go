package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// Callers is the number of concurrent callers in TestConcurrentCallsRunOnce.
const callers = 100

func TestConcurrentCallsRunOnce(t *testing.T) {
	store := memory.New()
	var runs atomic.Int32
	release := make(chan struct{})
	charge := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
		runs.Add(1)
		<-release // hold the key while the others arrive
		return receipt{ChargeID: "ch_1", Amount: o.Amount}, nil
	}, store)

	var wg sync.WaitGroup
	results := make([]receipt, callers)
	errs := make([]error, callers)
	var arrived sync.WaitGroup
	arrived.Add(callers)
	for i := range callers {
		wg.Go(func() {
			arrived.Done()
			results[i], errs[i] = charge(t.Context(), o1)
		})
	}
	arrived.Wait()
	// Let half of them finish against the in-progress record, then let the
	// handler finish so the rest see a completed one.
	close(release)
	wg.Wait()

	assert.Equal(t, int32(1), runs.Load(), "the handler body must run exactly once")
	var ok, inProgress int
	for i := range callers {
		switch {
		case errs[i] == nil:
			ok++
			assert.Equal(t, receipt{ChargeID: "ch_1", Amount: 100}, results[i])
		case errors.Is(errs[i], idempotency.ErrInProgress):
			inProgress++
		default:
			t.Errorf("caller %d: unexpected error %v", i, errs[i])
		}
	}
	assert.Equal(t, callers, ok+inProgress)
	assert.GreaterOrEqual(t, ok, 1)
	t.Logf("%d callers: %d got the result, %d got InProgressError", callers, ok, inProgress)

	// Every retry now gets the stored result.
	got, err := charge(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, "ch_1", got.ChargeID)
}
