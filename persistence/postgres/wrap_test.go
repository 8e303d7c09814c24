package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

type payment struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

type chargeResult struct {
	ChargeID string `json:"charge_id"`
	Amount   int    `json:"amount"`
}

func newPayment() payment { return payment{OrderID: "ord_" + rand.Text(), Amount: 4200} }

// handler is a payment handler that counts its runs (its side effects).
type handler struct {
	runs atomic.Int32
	err  error // returned, when set, instead of a charge
}

func (h *handler) charge(_ context.Context, p payment) (chargeResult, error) {
	n := h.runs.Add(1)
	if h.err != nil {
		return chargeResult{}, h.err
	}
	return chargeResult{ChargeID: fmt.Sprintf("ch_%s_%d", p.OrderID, n), Amount: p.Amount}, nil
}

func wrap(t testing.TB, h func(context.Context, payment) (chargeResult, error), store persistence.Store, opts ...idempotency.WrapOption) func(context.Context, payment) (chargeResult, error) {
	t.Helper()
	opts = append([]idempotency.WrapOption{idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("payments")}, opts...)
	wrapped, err := idempotency.Wrap(h, store, opts...)
	require.NoError(t, err)
	return wrapped
}

// TestStatementsPerCall counts the statements, each one round trip, that
// each kind of call sends: a first call 2 (reserve, complete), a replay 1
// (the failed reservation, which returns the record), a handler error 2
// (reserve, release). Once a connection has run each statement, it runs
// it as a prepared statement: no statement is prepared again.
func TestStatementsPerCall(t *testing.T) {
	c := &counter{}
	pool := newPool(t, newDatabase(t), counted(c), func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	ctx := t.Context()
	require.NoError(t, postgres.CreateTable(ctx, pool, "idempotency"))
	store := newStore(t, pool)
	h := &handler{}
	pay := wrap(t, h.charge, store)
	failing := &handler{err: errors.New("card declined")}
	payFailing := wrap(t, failing.charge, store)

	count := func(call func()) (queries, prepares int64) {
		t.Helper()
		q, p := c.queries.Load(), c.prepares.Load()
		call()
		return c.queries.Load() - q, c.prepares.Load() - p
	}
	for round := range 3 {
		p := newPayment()
		var first chargeResult
		q, prep := count(func() {
			var err error
			first, err = pay(ctx, p)
			require.NoError(t, err)
		})
		require.EqualValues(t, 2, q, "statements of a first call")
		q2, prep2 := count(func() {
			again, err := pay(ctx, p)
			require.NoError(t, err)
			require.Equal(t, first, again)
		})
		require.EqualValues(t, 1, q2, "statements of a replay")
		q3, prep3 := count(func() {
			_, err := payFailing(ctx, newPayment())
			require.Error(t, err)
		})
		require.EqualValues(t, 2, q3, "statements of a call whose handler fails")
		if round > 0 {
			require.Zero(t, prep+prep2+prep3, "statements prepared again")
		}
	}
	require.EqualValues(t, 3, h.runs.Load())
}
