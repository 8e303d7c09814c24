package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/internal/testing/waittest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// A watch in one process is woken by a completion, a release, an
// operator's release or a transaction's commit in another. A completion's
// wake-up carries the record as Get reads it; a release's carries none.
func TestWatchWakesOnEveryEnd(t *testing.T) {
	url := newDatabase(t)
	pool := newPool(t, url)
	require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency"))
	here, there := newStore(t, pool), newStore(t, newPool(t, url))
	ctx := t.Context()
	for _, end := range []struct {
		name      string
		do        func(rec *persistence.Record) error
		completes bool
	}{
		{"completion", func(rec *persistence.Record) error { return here.Update(ctx, completed(rec, `{}`)) }, true},
		{"release", func(rec *persistence.Record) error { return here.Delete(ctx, rec.Key, rec.Token) }, false},
		{"operator's release", func(rec *persistence.Record) error { return here.DeleteRecord(ctx, rec) }, false},
		{"commit", func(rec *persistence.Record) error {
			_, tx, err := here.BeginTx(ctx, rec)
			require.NoError(t, err)
			return tx.Commit(ctx, completed(rec, `{}`))
		}, true},
	} {
		t.Run(end.name, func(t *testing.T) {
			now := testNow()
			rec := recordtest.InProgress(newKey(), now)
			require.NoError(t, here.Put(ctx, rec, now))
			woken := waittest.Watch(t, there, rec.Key)
			require.NoError(t, end.do(rec))
			waittest.RequireWakeUp(t, woken, here, rec.Key, end.completes)
		})
	}
}

// A terminated listening connection wakes its watches once the Store
// listens again: a notification may have been lost meanwhile.
func TestWatchWakesAfterItsConnectionDrops(t *testing.T) {
	pool, store := setup(t)
	woken := waittest.Watch(t, store, newKey())
	_, err := pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE 'LISTEN %'`)
	require.NoError(t, err)
	<-woken
}

// A Store whose DB is a transaction cannot open a connection to listen on:
// Watch fails, and its waiters poll.
func TestWatchNeedsAPoolOrAConn(t *testing.T) {
	pool, _ := setup(t)
	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, _, err = newStore(t, tx).Watch(t.Context(), newKey())
	require.ErrorContains(t, err, "cannot listen")
}

// waiters returns the URL of a database of the test's own on srv, with the
// table, a holder's store and two waiting processes, each on a pool of
// its own. The holder's pool pings a connection before it uses it, so
// that the completion does not fail on one that a restart has broken; the
// waiters' pools do not, so that their polls fail then.
func waiters(t *testing.T, srv *pgserver.Server) (url string, holder *postgres.Store, waiters []*waittest.Waiter) {
	url = srv.NewDatabase(t)
	ping := func(cfg *pgxpool.Config) {
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	}
	pool := newPool(t, url, ping)
	require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency"))
	for range 2 {
		waiters = append(waiters, waittest.NewWaiter(t, newStore(t, newPool(t, url))))
	}
	return url, newStore(t, pool), waiters
}

// Waiters in other processes are woken by the holder's completion.
func TestWaitersAreWokenAcrossProcesses(t *testing.T) {
	_, holder, waiters := waiters(t, pgserver.Shared(t))
	waittest.HoldAndWait(t, holder, waiters, func() { time.Sleep(waittest.Hold) })
	waittest.RequireWoken(t, waiters)
}

// A waiter woken by a release takes its turn: it reserves the key, runs,
// and wakes the other waiter with its result.
func TestWaitersTakeTheirTurnAfterARelease(t *testing.T) {
	_, holder, waiters := waiters(t, pgserver.Shared(t))
	waittest.ReleaseAndWait(t, holder, waiters)
}

// A result too large for a notification's payload wakes its waiters with
// the key alone, and they read it.
func TestWaitersReadALargeResult(t *testing.T) {
	_, holder, waiters := waiters(t, pgserver.Shared(t))
	waittest.HoldLargeAndWait(t, holder, waiters, 9000, func() { time.Sleep(waittest.Hold) })
	waittest.RequireWokenToRead(t, waiters)
}

// Waiters whose connections are terminated while they wait, the listening
// ones and the others, still get the holder's result.
func TestWaitersSurviveTerminatedBackends(t *testing.T) {
	url, holder, waiters := waiters(t, pgserver.Shared(t))
	admin := newPool(t, url)
	waittest.HoldAndWait(t, holder, waiters, func() {
		_, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND datname = current_database()`)
		require.NoError(t, err)
	})
}

// Waiters whose server restarts while they wait still get the holder's
// result: their failed polls are retried, and their listening
// connections connect again.
func TestWaitersSurviveARestart(t *testing.T) {
	srv := pgserver.Start(t)
	_, holder, waiters := waiters(t, srv)
	waittest.HoldAndWait(t, holder, waiters, func() {
		require.NoError(t, srv.Restart(t.Context()))
	})
}
