package idempotency_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/internal/testing/teststeps"
	"github.com/retrysafe/retrysafe/persistence"
)

// order is the input of most tests.
type order struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

// receipt is their result.
type receipt struct {
	ChargeID string `json:"charge_id"`
	Amount   int    `json:"amount"`
}

// counter is a handler that counts its runs and can be made to fail.
type counter struct {
	mu   sync.Mutex
	runs int
	fail func(run int) error
}

func (c *counter) handle(ctx context.Context, o order) (receipt, error) {
	c.mu.Lock()
	c.runs++
	run := c.runs
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		if err := fail(run); err != nil {
			return receipt{ChargeID: "partial"}, err
		}
	}
	return receipt{ChargeID: "ch_" + o.OrderID + "_" + string(rune('0'+run)), Amount: o.Amount}, nil
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
}

// callAndRetry calls charge with in, then retries it n times, and checks
// that every retry gets the first call's result.
func callAndRetry(t *testing.T, charge func(context.Context, order) (receipt, error), in order, n int) {
	t.Helper()
	first, err := charge(t.Context(), in)
	require.NoError(t, err)
	for range n {
		again, err := charge(t.Context(), in)
		require.NoError(t, err)
		assert.Equal(t, first, again)
	}
}

// eventLog records the steps of the state machine.
type eventLog struct{ teststeps.Log }

func (e *eventLog) events() []idempotency.Event { return e.Events() }
func (e *eventLog) list() []string              { return e.Steps() }
func (e *eventLog) errOf(step string) error     { return e.ErrOf(step) }

func mustWrap[In, Out any](t testing.TB, h func(context.Context, In) (Out, error), store persistence.Store, opts ...idempotency.WrapOption) func(context.Context, In) (Out, error) {
	t.Helper()
	w, err := idempotency.Wrap(h, store, opts...)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	return w
}

// keyOf returns the record key of in, a whole input, with prefix.
func keyOf(t testing.TB, prefix string, in any) string {
	t.Helper()
	material, _, err := core.AppendMaterial(nil, nil, in)
	require.NoError(t, err)
	return core.Key(prefix, "", material)
}

// discardLogger returns a logger for tests that provoke errors on purpose.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
