package postgres_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// ledgerSetup returns a store and a pool on a database with a ledger
// table, the handler's own data.
func ledgerSetup(t *testing.T) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	pool, store := setup(t)
	_, err := pool.Exec(t.Context(), `CREATE TABLE ledger (charge text PRIMARY KEY, amount int NOT NULL)`)
	require.NoError(t, err)
	return pool, store
}

// charge is a handler's own write, in tx.
func charge(t *testing.T, tx pgx.Tx) string {
	t.Helper()
	id := "ch_" + rand.Text()
	_, err := tx.Exec(t.Context(), `INSERT INTO ledger (charge, amount) VALUES ($1, 4200)`, id)
	require.NoError(t, err)
	return id
}

// reservedTx reserves a new key in a store on a database with a ledger
// table, and begins a transaction with the handler's write in it: a call
// that completes its key with CompleteTx, before it does. The
// transaction is rolled back when t ends, unless it has ended.
func reservedTx(t *testing.T) (*pgxpool.Pool, *postgres.Store, *persistence.Record, pgx.Tx) {
	t.Helper()
	pool, store := ledgerSetup(t)
	now := testNow()
	rec := recordtest.InProgress(newKey(), now)
	require.NoError(t, store.Put(t.Context(), rec, now))
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	charge(t, tx)
	return pool, store, rec, tx
}

func charges(t *testing.T, db postgres.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM ledger`).Scan(&n))
	return n
}

// TestCompleteTxCommitsWithTheHandlersWrites: the handler's INSERT and the
// completion commit together; until then, others see neither.
func TestCompleteTxCommitsWithTheHandlersWrites(t *testing.T) {
	pool, store, rec, tx := reservedTx(t)
	ctx := t.Context()
	done := completed(rec, `{"charge":"ok"}`)
	require.NoError(t, store.CompleteTx(ctx, tx, done))

	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, rec, got) // not committed yet
	require.Zero(t, charges(t, pool))

	require.NoError(t, tx.Commit(ctx))
	got, err = store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, done, got)
	require.Equal(t, 1, charges(t, pool))

	// The same completion again, in a new transaction with the handler's
	// write again (a retry after a lost reply to the commit): the earlier
	// attempt committed, and this one says so, so that it is rolled back.
	tx2, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx2.Rollback(context.Background())
	charge(t, tx2)
	err = store.CompleteTx(ctx, tx2, done)
	require.ErrorIs(t, err, postgres.ErrAlreadyCompleted)
	require.NotErrorIs(t, err, persistence.ErrFenced)
	require.NoError(t, tx2.Rollback(ctx))
	require.Equal(t, 1, charges(t, pool))
}

// TestCompleteTxFenced: a completion with another token writes nothing
// and reports persistence.ErrFenced; it rolls back nothing by itself (the
// handler's write is still in the transaction, which goes on), and the
// caller's rollback leaves the record as it was.
func TestCompleteTxFenced(t *testing.T) {
	pool, store, rec, tx := reservedTx(t)
	ctx := t.Context()
	intruder := completed(rec, `"late"`)
	intruder.Token = rand.Text()
	require.ErrorIs(t, store.CompleteTx(ctx, tx, intruder), persistence.ErrFenced)
	require.Equal(t, 1, charges(t, tx), "the refused completion rolled the handler's write back")

	require.NoError(t, tx.Rollback(ctx))
	require.Zero(t, charges(t, pool))
	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, rec, got)

	// A record that is gone is refused too.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	require.ErrorIs(t, store.CompleteTx(ctx, tx, completed(recordtest.InProgress(newKey(), testNow()), `"x"`)), persistence.ErrFenced)
}

// TestCompleteTxRollback: a completion that applied in a transaction that
// is rolled back leaves the record in progress, as its reservation wrote
// it; the owner can still complete it.
func TestCompleteTxRollback(t *testing.T) {
	pool, store, rec, tx := reservedTx(t)
	ctx := t.Context()
	require.NoError(t, store.CompleteTx(ctx, tx, completed(rec, `"rolled back"`)))
	require.NoError(t, tx.Rollback(ctx))

	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, rec, got)
	require.Zero(t, charges(t, pool))
	done := completed(rec, `"completed"`)
	require.NoError(t, store.Update(ctx, done))
	got, err = store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, done, got)
}

// TestCompleteTxHoldsTheKey: a takeover sent while a completion waits in
// an open transaction gets the transaction's outcome, committed: a
// conflict with the completed record.
func TestCompleteTxHoldsTheKey(t *testing.T) {
	_, store, rec, tx := reservedTx(t)
	ctx := t.Context()
	done := completed(rec, `"held"`)
	require.NoError(t, store.CompleteTx(ctx, tx, done))

	// At a time past the in-progress expiry: without the transaction's
	// completion, a takeover.
	later := rec.InProgressExpiresAt.Add(1)
	result := make(chan error, 1)
	go func() { result <- store.Put(ctx, recordtest.InProgress(rec.Key, later), later) }()
	require.NoError(t, tx.Commit(ctx))
	var conflict *persistence.ConflictError
	require.ErrorAs(t, <-result, &conflict)
	if conflict.Existing != nil {
		requireRecord(t, done, conflict.Existing)
	}
}

func TestCompleteTxRefusesRenewals(t *testing.T) {
	pool, store := ledgerSetup(t)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	require.ErrorContains(t, store.CompleteTx(ctx, tx, recordtest.InProgress(newKey(), testNow())), "want COMPLETED")
	require.ErrorContains(t, store.CompleteTx(ctx, nil, completed(recordtest.InProgress(newKey(), testNow()), "")), "nil transaction")
}
