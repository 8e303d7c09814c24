package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// The store's statements run at READ COMMITTED, PostgreSQL's default, in
// the transaction of each statement. These tests race them on one key,
// each writer on a connection of its own, and check the protocol's
// outcomes: never two reservations, never a completion lost or reported
// as refused when it applied.

const (
	racers = 50 // concurrent writers of one key
	rounds = 10 // keys raced, one after the other
)

// raceSetup returns a store on a pool with a connection for every racer,
// opened before the race, at the isolation level the sessions have by
// default, or at isolation when given.
func raceSetup(t *testing.T, isolation ...string) *postgres.Store {
	t.Helper()
	url := newDatabase(t)
	pool := newPool(t, url, func(c *pgxpool.Config) {
		c.MaxConns, c.MinConns = racers, racers
		if len(isolation) > 0 {
			c.ConnConfig.RuntimeParams["default_transaction_isolation"] = isolation[0]
		}
	})
	var level string
	require.NoError(t, pool.QueryRow(t.Context(), `SHOW transaction_isolation`).Scan(&level))
	want := "read committed"
	if len(isolation) > 0 {
		want = isolation[0]
	}
	require.Equal(t, want, level)
	require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency"))
	require.Eventually(t, func() bool { return pool.Stat().TotalConns() == racers }, time.Minute, 10*time.Millisecond)
	return newStore(t, pool)
}

// race runs f(i) for i in [0, n) at once, each in a goroutine started
// before any runs, and returns their errors.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// checkOneWinner checks that exactly one of recs was reserved (its error
// nil), that the others are conflicts carrying the winner's record (or
// none), and that the store holds the winner's record.
func checkOneWinner(t *testing.T, store *postgres.Store, recs []*persistence.Record, errs []error) {
	t.Helper()
	var winner *persistence.Record
	for i, err := range errs {
		if err == nil {
			require.Nil(t, winner, "two reservations applied: %s and %s", tokenOf(winner), recs[i].Token)
			winner = recs[i]
		}
	}
	require.NotNil(t, winner, "no reservation applied")
	withRecord := 0
	for _, err := range errs {
		if err == nil {
			continue
		}
		var conflict *persistence.ConflictError
		require.ErrorAs(t, err, &conflict)
		if conflict.Existing != nil {
			requireRecord(t, winner, conflict.Existing)
			withRecord++
		}
	}
	t.Logf("%d conflicts carried the winner's record, %d did not (a reservation inserted after their snapshot)", withRecord, len(errs)-1-withRecord)
	got, err := store.Get(t.Context(), winner.Key)
	require.NoError(t, err)
	requireRecord(t, winner, got)
}

func tokenOf(rec *persistence.Record) string {
	if rec == nil {
		return ""
	}
	return rec.Token
}

// TestConcurrentReservations: of 50 concurrent reservations of a new key,
// exactly one applies.
func TestConcurrentReservations(t *testing.T) {
	store := raceSetup(t)
	ctx := t.Context()
	for range rounds {
		now := testNow()
		key := newKey()
		recs := make([]*persistence.Record, racers)
		for i := range recs {
			recs[i] = recordtest.InProgress(key, now)
		}
		errs := race(racers, func(i int) error { return store.Put(ctx, recs[i], now) })
		checkOneWinner(t, store, recs, errs)
	}
}

// TestConcurrentTakeovers: of 50 concurrent reservations of a key whose
// record has lapsed (or expired), exactly one takes it over: each sees
// the one before it, committed, as live.
func TestConcurrentTakeovers(t *testing.T) {
	store := raceSetup(t)
	ctx := t.Context()
	for round := range rounds {
		now := testNow()
		old := recordtest.InProgress(newKey(), now.Add(-time.Minute))
		old.InProgressExpiresAt = now.Add(-time.Second)
		require.NoError(t, store.Put(ctx, old, now.Add(-time.Minute)))
		if round%2 == 1 { // completed and expired instead
			done := completed(old, `"old"`)
			done.ExpiresAt = now.Add(-time.Second)
			require.NoError(t, store.Update(ctx, done))
		}
		recs := make([]*persistence.Record, racers)
		for i := range recs {
			recs[i] = recordtest.InProgress(old.Key, now)
		}
		errs := race(racers, func(i int) error { return store.Put(ctx, recs[i], now) })
		checkOneWinner(t, store, recs, errs)
	}
}

// TestCompletionRacesTakeover: the owner of a lapsed reservation completes
// it while others try to take it over. Either the completion applies and
// every takeover is a conflict with the completed record, or one takeover
// applies and the completion is refused.
func TestCompletionRacesTakeover(t *testing.T) {
	store := raceSetup(t)
	ctx := t.Context()
	outcomes := map[string]int{}
	for range rounds {
		now := testNow()
		own := recordtest.InProgress(newKey(), now.Add(-time.Minute))
		own.InProgressExpiresAt = now.Add(-time.Second)
		require.NoError(t, store.Put(ctx, own, now.Add(-time.Minute)))
		done := completed(own, `"late"`)
		recs := make([]*persistence.Record, racers)
		for i := range recs {
			recs[i] = recordtest.InProgress(own.Key, now)
		}
		errs := race(racers, func(i int) error {
			if i == 0 {
				return store.Update(ctx, done)
			}
			return store.Put(ctx, recs[i], now)
		})
		got, err := store.Get(ctx, own.Key)
		require.NoError(t, err)
		if errs[0] == nil {
			outcomes["completed"]++
			requireRecord(t, done, got)
			for _, err := range errs[1:] {
				var conflict *persistence.ConflictError
				require.ErrorAs(t, err, &conflict)
				if conflict.Existing != nil {
					requireRecord(t, done, conflict.Existing)
				}
			}
			continue
		}
		outcomes["taken over"]++
		require.ErrorIs(t, errs[0], persistence.ErrFenced)
		checkOneWinner(t, store, recs[1:], errs[1:])
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestRepeatedWritesRace: a completion and a release sent twice at once
// (a client library's retry of a write whose reply was lost, on another
// connection) both succeed: one applies, the other finds it done, even
// when it waited for the first to commit.
func TestRepeatedWritesRace(t *testing.T) {
	store := raceSetup(t)
	ctx := t.Context()
	for range rounds {
		now := testNow()
		recs := make([]*persistence.Record, racers/2)
		for i := range recs {
			recs[i] = recordtest.InProgress(newKey(), now)
			require.NoError(t, store.Put(ctx, recs[i], now))
		}
		// Completions of even records, releases of odd ones, each twice.
		errs := race(racers, func(i int) error {
			rec := recs[i/2]
			if i/2%2 == 0 {
				return store.Update(ctx, completed(rec, `"once"`))
			}
			return store.Delete(ctx, rec.Key, rec.Token)
		})
		for i, err := range errs {
			require.NoError(t, err, "write %d", i)
		}
		for i, rec := range recs {
			got, err := store.Get(ctx, rec.Key)
			if i%2 == 0 {
				require.NoError(t, err)
				requireRecord(t, completed(rec, `"once"`), got)
			} else {
				require.True(t, errors.Is(err, persistence.ErrNotFound), "Get after release: %v", err)
			}
		}
	}
}

// TestReservationsWaitForTheHolder: reservations of a key whose
// reservation (a takeover of a lapsed record, or the insert of a new key)
// is not committed yet wait for it, then see it. At READ COMMITTED each
// is a conflict: carrying the winner's record when it took an existing
// row over, and without it when it inserted the key (no version of the
// row is in the waiting statements' snapshots; the caller then reads it
// with Get). At REPEATABLE READ each fails with a serialization failure
// instead: an error, never a second reservation.
func TestReservationsWaitForTheHolder(t *testing.T) {
	for _, tc := range []struct {
		isolation string
		takeover  bool // of a lapsed record, else the insert of a new key
		want      string
	}{
		{"read committed", true, "conflict with the record"},
		{"read committed", false, "conflict without the record"},
		{"repeatable read", true, "serialization failure"},
		{"repeatable read", false, "serialization failure"},
	} {
		name := strings.ReplaceAll(tc.isolation, " ", "_") + "/new_key"
		if tc.takeover {
			name = strings.ReplaceAll(tc.isolation, " ", "_") + "/takeover"
		}
		t.Run(name, func(t *testing.T) {
			pool := newPool(t, newDatabase(t), func(c *pgxpool.Config) {
				c.MaxConns = racers
				c.ConnConfig.RuntimeParams["default_transaction_isolation"] = tc.isolation
			})
			ctx := t.Context()
			require.NoError(t, postgres.CreateTable(ctx, pool, "idempotency"))
			store := newStore(t, pool)
			now := testNow()
			key := newKey()
			if tc.takeover {
				old := recordtest.InProgress(key, now.Add(-time.Minute))
				old.InProgressExpiresAt = now.Add(-time.Second)
				require.NoError(t, store.Put(ctx, old, now.Add(-time.Minute)))
			}
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback(context.Background())
			winner := recordtest.InProgress(key, now)
			require.NoError(t, newStore(t, tx).Put(ctx, winner, now))

			waiting := racers - 2 // the transaction's connection, and one to watch
			results := make(chan error, waiting)
			for range waiting {
				go func() { results <- store.Put(ctx, recordtest.InProgress(key, now), now) }()
			}
			require.Eventually(t, func() bool {
				var n int
				err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
				return err == nil && n == waiting
			}, time.Minute, 10*time.Millisecond, "the reservations do not all wait for the transaction")
			require.NoError(t, tx.Commit(ctx))

			for range waiting {
				err := <-results
				var (
					conflict *persistence.ConflictError
					pgErr    *pgconn.PgError
				)
				switch tc.want {
				case "conflict with the record":
					require.ErrorAs(t, err, &conflict)
					requireRecord(t, winner, conflict.Existing)
				case "conflict without the record":
					require.ErrorAs(t, err, &conflict)
					require.Nil(t, conflict.Existing)
				case "serialization failure":
					require.ErrorAs(t, err, &pgErr)
					require.Equal(t, "40001", pgErr.Code, "%v", err)
				}
			}
			got, err := store.Get(ctx, key)
			require.NoError(t, err)
			requireRecord(t, winner, got)
		})
	}
}
