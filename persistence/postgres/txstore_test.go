package postgres_test

// Tests of the Store as a persistence.TxStore, against a real server:
// what the transaction's Commit writes, and what its error says was
// written, for every way a commit ends.

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// begin reserves a new key and begins its transaction, as the library
// does, and returns the reservation, the handler's context and the
// transaction.
func begin(t *testing.T, store *postgres.Store) (*persistence.Record, context.Context, persistence.Tx) {
	t.Helper()
	now := testNow()
	rec := recordtest.InProgress(newKey(), now)
	require.NoError(t, store.Put(t.Context(), rec, now))
	ctx, tx, err := store.BeginTx(t.Context(), rec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return rec, ctx, tx
}

// handlerCharge is a handler's write in the transaction of ctx.
func handlerCharge(t *testing.T, ctx context.Context) {
	t.Helper()
	tx, ok := postgres.Tx(ctx)
	require.True(t, ok, "the handler's context carries the transaction")
	charge(t, tx)
}

func recordOf(t *testing.T, store *postgres.Store, key string) *persistence.Record {
	t.Helper()
	rec, err := store.Get(t.Context(), key)
	require.NoError(t, err)
	return rec
}

// requireCanceled fails unless err says that nothing was written, with
// the server's error of SQLSTATE code.
func requireCanceled(t *testing.T, err error, code string) {
	t.Helper()
	require.ErrorIs(t, err, persistence.ErrCommitCanceled)
	require.NotErrorIs(t, err, persistence.ErrFenced)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, code, pgErr.Code, "%v", err)
}

func TestTxCommitsTheHandlersWritesWithTheCompletion(t *testing.T) {
	pool, store := ledgerSetup(t)
	rec, ctx, tx := begin(t, store)
	handlerCharge(t, ctx)
	require.Zero(t, charges(t, pool), "nothing is visible before the commit")
	requireRecord(t, rec, recordOf(t, store, rec.Key))

	done := completed(rec, `{"charge":"ok"}`)
	require.NoError(t, tx.Commit(t.Context(), done))
	requireRecord(t, done, recordOf(t, store, rec.Key))
	require.Equal(t, 1, charges(t, pool))

	require.NoError(t, tx.Rollback(t.Context()), "a rollback after the commit does nothing")
	require.Equal(t, 1, charges(t, pool))
	require.Error(t, tx.Commit(t.Context(), done), "a transaction commits once")
	require.Zero(t, pool.Stat().AcquiredConns(), "the transaction's connection went back to the pool")
}

// The handler gets the transaction to write in, not to end: its Commit
// and Rollback are refused, and savepoints work.
func TestTxIsTheHandlersToWriteIn(t *testing.T) {
	pool, store := ledgerSetup(t)
	_, ok := postgres.Tx(t.Context())
	require.False(t, ok, "no transaction outside a handler")

	rec, ctx, tx := begin(t, store)
	htx, ok := postgres.Tx(ctx)
	require.True(t, ok)
	charge(t, htx)
	require.ErrorIs(t, htx.Commit(ctx), postgres.ErrTxOwned)
	require.ErrorIs(t, htx.Rollback(ctx), postgres.ErrTxOwned)

	sp, err := htx.Begin(ctx)
	require.NoError(t, err)
	charge(t, sp)
	require.NoError(t, sp.Rollback(ctx), "a savepoint of the handler's, rolled back")
	require.Equal(t, 1, charges(t, htx))

	require.NoError(t, tx.Commit(t.Context(), completed(rec, `"ok"`)))
	require.Equal(t, 1, charges(t, pool))
	_, err = htx.Exec(ctx, `SELECT 1`)
	require.ErrorIs(t, err, pgx.ErrTxClosed, "a write after the commit goes nowhere")
}

func TestTxRollbackWritesNothing(t *testing.T) {
	pool, store := ledgerSetup(t)
	rec, ctx, tx := begin(t, store)
	handlerCharge(t, ctx)
	require.NoError(t, tx.Rollback(t.Context()))
	require.NoError(t, tx.Rollback(t.Context()), "twice")
	require.Zero(t, charges(t, pool))
	requireRecord(t, rec, recordOf(t, store, rec.Key))
	require.Error(t, tx.Commit(t.Context(), completed(rec, `"late"`)))
	requireRecord(t, rec, recordOf(t, store, rec.Key))
}

// A completion of a record that is not the caller's reservation any more
// writes nothing, the handler's writes included.
func TestTxCommitFenced(t *testing.T) {
	t.Run("taken over", func(t *testing.T) {
		pool, store := ledgerSetup(t)
		rec, ctx, tx := begin(t, store)
		handlerCharge(t, ctx)
		later := rec.InProgressExpiresAt.Add(time.Millisecond)
		other := recordtest.InProgress(rec.Key, later)
		require.NoError(t, store.Put(t.Context(), other, later), "the lapsed reservation is taken over")

		err := tx.Commit(t.Context(), completed(rec, `"late"`))
		require.ErrorIs(t, err, persistence.ErrFenced)
		require.NotErrorIs(t, err, persistence.ErrCommitCanceled)
		require.Zero(t, charges(t, pool))
		requireRecord(t, other, recordOf(t, store, rec.Key))
	})
	t.Run("released", func(t *testing.T) {
		pool, store := ledgerSetup(t)
		rec, ctx, tx := begin(t, store)
		handlerCharge(t, ctx)
		require.NoError(t, store.Delete(t.Context(), rec.Key, rec.Token))
		require.ErrorIs(t, tx.Commit(t.Context(), completed(rec, `"late"`)), persistence.ErrFenced)
		require.Zero(t, charges(t, pool))
	})
}

// The caller's own completion, there already, is done: the commit
// succeeds and writes nothing again.
func TestTxCommitOfACompletedRecordIsDone(t *testing.T) {
	pool, store := ledgerSetup(t)
	rec, ctx, tx := begin(t, store)
	handlerCharge(t, ctx)
	done := completed(rec, `"ok"`)
	require.NoError(t, store.Update(t.Context(), done), "an earlier attempt's completion")
	require.NoError(t, tx.Commit(t.Context(), done))
	require.Zero(t, charges(t, pool), "the writes that would have repeated it are rolled back")
	requireRecord(t, done, recordOf(t, store, rec.Key))
}

// A statement of the handler that failed aborts the transaction: a
// handler that goes on as if it had not gets a canceled commit.
func TestTxCommitAfterAFailedStatementIsCanceled(t *testing.T) {
	pool, store := ledgerSetup(t)
	rec, ctx, tx := begin(t, store)
	htx, _ := postgres.Tx(ctx)
	charge(t, htx)
	_, err := htx.Exec(ctx, `INSERT INTO ledger (charge, amount) VALUES ('ch_1', 'not a number')`)
	require.Error(t, err)
	requireCanceled(t, tx.Commit(t.Context(), completed(rec, `"ok"`)), "25P02") // in_failed_sql_transaction
	require.Zero(t, charges(t, pool))
	requireRecord(t, rec, recordOf(t, store, rec.Key))
}

// COMMIT answered with an error proves that nothing was written: a
// deferred constraint that the handler's write violates, checked at
// COMMIT, and a serialization failure at COMMIT, as Aurora DSQL answers
// a conflict (here raised by a deferred constraint trigger).
func TestTxCommitRefusedByTheServer(t *testing.T) {
	t.Run("deferred unique constraint", func(t *testing.T) {
		pool, store := setup(t)
		_, err := pool.Exec(t.Context(), `CREATE TABLE ledger (charge text, amount int NOT NULL,
			UNIQUE (charge) DEFERRABLE INITIALLY DEFERRED);
			INSERT INTO ledger VALUES ('ch_1', 4200)`)
		require.NoError(t, err)
		rec, ctx, tx := begin(t, store)
		htx, _ := postgres.Tx(ctx)
		_, err = htx.Exec(ctx, `INSERT INTO ledger VALUES ('ch_1', 4200)`)
		require.NoError(t, err, "the constraint is checked at COMMIT")
		requireCanceled(t, tx.Commit(t.Context(), completed(rec, `"ok"`)), "23505")
		require.Equal(t, 1, charges(t, pool))
		requireRecord(t, rec, recordOf(t, store, rec.Key))
	})
	t.Run("serialization failure", func(t *testing.T) {
		pool, store := ledgerSetup(t)
		refuseAtCommit(t, pool, "ledger", "40001")
		rec, ctx, tx := begin(t, store)
		handlerCharge(t, ctx)
		requireCanceled(t, tx.Commit(t.Context(), completed(rec, `"ok"`)), "40001")
		require.Zero(t, charges(t, pool))
		requireRecord(t, rec, recordOf(t, store, rec.Key))
	})
}

// refuseAtCommit makes COMMIT of a transaction that wrote a row of table
// fail with an ERROR of SQLSTATE code, from a deferred constraint
// trigger, which runs at COMMIT. TRUNCATE ledger_refusals ends it.
func refuseAtCommit(t *testing.T, pool *pgxpool.Pool, table, code string) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `
CREATE TABLE ledger_refusals (code text NOT NULL);
INSERT INTO ledger_refusals VALUES ('`+code+`');
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE c text;
BEGIN
	SELECT code INTO c FROM ledger_refusals LIMIT 1;
	IF c IS NOT NULL THEN
		RAISE EXCEPTION 'refused at commit' USING ERRCODE = c;
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON `+pgx.Identifier{table}.Sanitize()+` DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION refuse();`)
	require.NoError(t, err)
}

// A COMMIT that gets no answer has an unknown outcome, and both happen.
// Here COMMIT waits in a deferred trigger when the client gives up. pgx
// then closes the connection and sends the server a cancel request. If
// the request reaches the server while COMMIT waits, the server cancels
// COMMIT and rolls back. If it does not (the network is gone), the
// server commits once the wait ends. Either way the record and the
// handler's writes go together, and the error proves nothing.
func TestTxCommitWithoutAnAnswerIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		name string
		// reachable says whether pgx's cancel request reaches the
		// server.
		reachable bool
		want      persistence.Status
		charges   int
	}{
		{"the cancel request arrives: rolled back", true, persistence.StatusInProgress, 0},
		{"the network is gone: committed", false, persistence.StatusCompleted, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lost atomic.Bool
			url := newDatabase(t)
			pool := newPool(t, url, func(cfg *pgxpool.Config) {
				dial := cfg.ConnConfig.DialFunc
				cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
					if lost.Load() {
						return nil, errors.New("the network is gone")
					}
					return dial(ctx, network, addr)
				}
			})
			require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency"))
			store := newStore(t, pool)
			observer := newPool(t, url)
			_, err := observer.Exec(t.Context(), `
CREATE TABLE ledger (charge text PRIMARY KEY, amount int NOT NULL);
CREATE FUNCTION wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(42);
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER wait_at_commit AFTER INSERT ON ledger DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION wait_at_commit();`)
			require.NoError(t, err)
			holder, err := observer.Acquire(t.Context())
			require.NoError(t, err)
			defer holder.Release()
			_, err = holder.Exec(t.Context(), `SELECT pg_advisory_lock(42)`)
			require.NoError(t, err)

			rec, ctx, tx := begin(t, store)
			handlerCharge(t, ctx)
			commitCtx, cancel := context.WithCancel(t.Context())
			result := make(chan error, 1)
			go func() { result <- tx.Commit(commitCtx, completed(rec, `"ok"`)) }()
			pid := waitForActivity(t, observer, `wait_event_type = 'Lock' AND wait_event = 'advisory' AND query ILIKE 'commit%'`)
			lost.Store(!tc.reachable)
			cancel() // the client gives up: pgx closes the connection without an answer

			err = <-result
			require.Error(t, err)
			require.NotErrorIs(t, err, persistence.ErrCommitCanceled, "no answer proves nothing")
			require.NotErrorIs(t, err, persistence.ErrFenced)

			if tc.reachable {
				// The cancel request ends COMMIT, and the backend with
				// it: only then may the lock go, or COMMIT would win.
				waitForExit(t, observer, pid)
			}
			_, err = holder.Exec(t.Context(), `SELECT pg_advisory_unlock(42)`)
			require.NoError(t, err)
			waitForExit(t, observer, pid)
			assert.Equal(t, tc.want, recordOf(t, newStore(t, observer), rec.Key).Status)
			assert.Equal(t, tc.charges, charges(t, observer), "the handler's writes go with the completion")
		})
	}
}

// The transaction is READ COMMITTED whatever the session's default, so
// that the completion applies after a renewal of the lease that committed
// while the handler ran.
func TestTxIsReadCommitted(t *testing.T) {
	url := newDatabase(t)
	pool := newPool(t, url, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	})
	require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency"))
	_, err := pool.Exec(t.Context(), `CREATE TABLE ledger (charge text PRIMARY KEY, amount int NOT NULL)`)
	require.NoError(t, err)
	store := newStore(t, pool)

	rec, ctx, tx := begin(t, store)
	htx, _ := postgres.Tx(ctx)
	var level string
	require.NoError(t, htx.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level))
	require.Equal(t, "read committed", level)
	charge(t, htx)

	renewed := *rec
	renewed.InProgressExpiresAt = rec.InProgressExpiresAt.Add(time.Minute)
	require.NoError(t, store.Update(t.Context(), &renewed), "a renewal, beside the transaction")
	require.NoError(t, tx.Commit(t.Context(), completed(&renewed, `"ok"`)))
	require.Equal(t, 1, charges(t, pool))
}

// BeginTx needs a DB that runs the transaction on a connection of its
// own.
func TestBeginTxNeedsAPool(t *testing.T) {
	url := newDatabase(t)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, postgres.CreateTable(t.Context(), conn, "idempotency"))
	now := testNow()
	rec := recordtest.InProgress(newKey(), now)

	onConn := newStore(t, conn)
	_, _, err = onConn.BeginTx(t.Context(), rec)
	require.ErrorContains(t, err, "*pgxpool.Pool")

	outer, err := conn.Begin(t.Context())
	require.NoError(t, err)
	defer outer.Rollback(context.Background())
	_, _, err = newStore(t, outer).BeginTx(t.Context(), rec)
	require.ErrorContains(t, err, "*pgxpool.Pool")
}

// waitForActivity waits until a backend of the test's database, other
// than the caller's, matches the pg_stat_activity condition where, and
// returns its process ID. The bound only keeps a broken test from
// hanging.
func waitForActivity(t *testing.T, db postgres.DB, where string) (pid int) {
	t.Helper()
	eventually(t, func() bool {
		err := db.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND `+where+` LIMIT 1`).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return false
		}
		require.NoError(t, err)
		return true
	})
	return pid
}

// waitForExit waits until the backend of process ID pid has ended.
func waitForExit(t *testing.T, db postgres.DB, pid int) {
	t.Helper()
	eventually(t, func() bool {
		var n int
		require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n))
		return n == 0
	})
}

// eventually waits until cond holds, polling. The bound only keeps a
// broken test from hanging.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not hold within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
