package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// TestStatementsPerCall counts the statements, each one round trip, that
// each kind of call sends: a first call 3 (reserve, complete, NOTIFY), a
// replay 1 (the failed reservation, which returns the record), a handler
// error 3 (reserve, release, NOTIFY). Once a connection has run each statement, it runs
// it as a prepared statement: no statement is prepared again.
func TestStatementsPerCall(t *testing.T) {
	c := &counter{}
	pool := newPool(t, newDatabase(t), counted(c), func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	ctx := t.Context()
	require.NoError(t, postgres.CreateTable(ctx, pool, "idempotency"))
	store := newStore(t, pool)
	h := &paytest.Handler{}
	pay := paytest.Wrap(t, h.Charge, store)
	failing := &paytest.Handler{Err: errors.New("card declined")}
	payFailing := paytest.Wrap(t, failing.Charge, store)

	count := func(call func()) (queries, prepares int64) {
		t.Helper()
		q, p := c.queries.Load(), c.prepares.Load()
		call()
		return c.queries.Load() - q, c.prepares.Load() - p
	}
	for round := range 3 {
		p := paytest.New()
		var first paytest.Charge
		q, prep := count(func() {
			var err error
			first, err = pay(ctx, p)
			require.NoError(t, err)
		})
		require.EqualValues(t, 3, q, "statements of a first call: reserve, complete, NOTIFY")
		q2, prep2 := count(func() {
			again, err := pay(ctx, p)
			require.NoError(t, err)
			require.Equal(t, first, again)
		})
		require.EqualValues(t, 1, q2, "statements of a replay")
		q3, prep3 := count(func() {
			_, err := payFailing(ctx, paytest.New())
			require.Error(t, err)
		})
		require.EqualValues(t, 3, q3, "statements of a call whose handler fails: reserve, release, NOTIFY")
		if round > 0 {
			require.Zero(t, prep+prep2+prep3, "statements prepared again")
		}
	}
	require.EqualValues(t, 3, h.Runs.Load())
}
