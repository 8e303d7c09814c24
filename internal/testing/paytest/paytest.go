// Package paytest is the function that the stores' tests wrap with
// idempotency.Wrap: it charges a payment, and counts its runs, the side
// effects that a retry must not repeat.
package paytest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// Payment is the input. Its order ID is the idempotency key (see [Wrap]).
type Payment struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

// Charge is the output, which the store keeps and replays.
type Charge struct {
	ChargeID string `json:"charge_id"`
	Amount   int    `json:"amount"`
}

// New returns a payment of 4200 for a new order.
func New() Payment { return Payment{OrderID: "ord_" + rand.Text(), Amount: 4200} }

// Handler charges payments and counts its runs.
type Handler struct {
	Runs atomic.Int32
	Err  error // returned, when set, instead of a charge
}

// Charge charges p: the charge's ID names p's order and the run.
func (h *Handler) Charge(_ context.Context, p Payment) (Charge, error) {
	n := h.Runs.Add(1)
	if h.Err != nil {
		return Charge{}, h.Err
	}
	return Charge{ChargeID: fmt.Sprintf("ch_%s_%d", p.OrderID, n), Amount: p.Amount}, nil
}

// Wrap wraps h with idempotency.Wrap over store: keyed by the order ID,
// with the key prefix "payments", and opts after those.
func Wrap(t testing.TB, h func(context.Context, Payment) (Charge, error), store persistence.Store, opts ...idempotency.WrapOption) func(context.Context, Payment) (Charge, error) {
	t.Helper()
	opts = append([]idempotency.WrapOption{idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("payments")}, opts...)
	wrapped, err := idempotency.Wrap(h, store, opts...)
	require.NoError(t, err)
	return wrapped
}
