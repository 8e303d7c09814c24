package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
	pgstore "github.com/retrysafe/retrysafe/persistence/postgres"
)

// putExpired writes n records to the fixture's store that expired an hour
// ago, in progress and completed, and returns their keys.
func putExpired(t *testing.T, f *fixture, n int) []string {
	t.Helper()
	return putExpiredAt(t, f, time.Now(), n)
}

// putExpiredAt is putExpired with the clock at now.
func putExpiredAt(t *testing.T, f *fixture, now time.Time, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		rec := &persistence.Record{Key: core.Key("orders.main.process", "", fmt.Appendf(nil, `"old_%d"`, i)), Status: persistence.StatusInProgress,
			ExpiresAt: now.Add(-time.Hour).Truncate(time.Second), InProgressExpiresAt: now.Add(-2 * time.Hour), Token: fmt.Sprintf("T%d", i)}
		require.NoError(t, f.store.Put(t.Context(), rec, now))
		if i%2 == 0 {
			done := *rec
			done.Status, done.InProgressExpiresAt, done.Response = persistence.StatusCompleted, time.Time{}, []byte(`"ok"`)
			require.NoError(t, f.store.Update(t.Context(), &done))
		}
		keys = append(keys, rec.Key)
	}
	return keys
}

// sweep deletes the records expired at its start, in batches, and keeps
// the others: live ones, stuck ones, which their call may still
// complete, and held ones.
func TestSweep(t *testing.T) {
	f := postgresFixture(t)
	putGolden(t, f)
	r := runAt(t, goldenNow, "", f.with("sweep")...)
	requireOK(t, r)
	require.Regexp(t, `^deleted 1 expired record from PostgreSQL table "idempotency" in database "\w+" at 127\.0\.0\.1:\d+, in 1 batch of at most 1000\n$`, r.stdout)
	requireSweptGolden(t, f)

	putExpired(t, f, 25)
	r = runCmd(t, f.with("sweep", "--batch-size", "10", "--rate", "0", "-o", "json")...)
	requireOK(t, r)
	require.JSONEq(t, `{"deleted": 25, "batches": 3}`, r.stdout)
	r = runCmd(t, f.with("sweep", "-o", "json")...)
	requireOK(t, r)
	require.JSONEq(t, `{"deleted": 0, "batches": 1}`, r.stdout)
}

// Redis deletes expired records itself: sweep says so, and deletes
// nothing. DynamoDB's are in sweep_test.go.
func TestSweepIsNotNeededForRedis(t *testing.T) {
	f := redisFixture(t)
	putGolden(t, f)
	r := runAt(t, goldenNow, "", f.with("sweep")...)
	requireOK(t, r)
	require.Equal(t, "nothing to sweep: Redis deletes each record itself at its expiry\n", r.stdout)
	r = runAt(t, goldenNow, "", f.with("get", goldenRecords[4].Key)...)
	requireOK(t, r)
}

func TestPostgresMismatch(t *testing.T) {
	f := postgresFixture(t, func(o *pgstore.Options) { o.Schema = "app" })
	putGolden(t, f)
	key := goldenRecords[0].Key
	url := f.flags[1]
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"the table in its schema", []string{"get", key, "--postgres", url, "--pg-schema", "app"}, exitOK, ""},
		{"another schema", []string{"get", key, "--postgres", url}, exitStore,
			`PostgreSQL table "idempotency" in database "` + strings.TrimPrefix(url[strings.LastIndexByte(url, '/'):strings.IndexByte(url, '?')], "/") +
				`" at 127.0.0.1:`},
		{"a missing table", []string{"ls", "--postgres", url, "--pg-schema", "app", "--pg-table", "records"}, exitStore,
			"does not exist: check --pg-table and --pg-schema, and the database of --postgres"},
		{"an attribute flag", []string{"get", key, "--postgres", url, "--status-attr", "state"}, exitUsage, "--status-attr is for DynamoDB and Redis"},
		{"a DynamoDB flag", []string{"get", key, "--postgres", url, "--key-attr", "pk"}, exitUsage, "are for DynamoDB and Redis; a PostgreSQL URL is PostgreSQL"},
		{"a table name too long", []string{"get", key, "--postgres", url, "--pg-table", strings.Repeat("t", 64)}, exitUsage, "longer than PostgreSQL's 63 bytes"},
		{"no record", []string{"get", key + "0", "--postgres", url, "--pg-schema", "app"}, exitNotFound, "holds no record for"},
		{"two stores", []string{"get", key, "--postgres", url, "--redis", "redis://127.0.0.1:1"}, exitUsage, "give one store"},
		{"PostgreSQL flags without --postgres", []string{"get", key, "--table", "t", "--pg-table", "idempotency"}, exitUsage, "give --postgres too"},
		{"not a URL", []string{"get", key, "--postgres", "postgres://u:secret@[::1"}, exitUsage, "--postgres: cannot parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAt(t, goldenNow, "", tc.args...)
			if tc.code == exitOK {
				requireOK(t, r)
				return
			}
			requireFailure(t, r, tc.code, tc.want)
			require.NotContains(t, r.stderr, "secret", "no password in messages")
		})
	}
}

func TestPostgresUnavailable(t *testing.T) {
	t.Run("no server", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		r := runCmd(t, "stats", "--postgres", "postgres://postgres:secret@"+addr+"/db?sslmode=disable")
		requireFailure(t, r, exitStore, `PostgreSQL table "idempotency" in database "db" at `+addr)
		require.NotContains(t, r.stderr, "secret")
	})
	t.Run("a statement past --request-timeout", func(t *testing.T) {
		f := postgresFixture(t)
		conn, err := pgx.Connect(t.Context(), f.flags[1])
		require.NoError(t, err)
		defer conn.Close(context.Background())
		tx, err := conn.Begin(t.Context())
		require.NoError(t, err)
		defer tx.Rollback(context.Background())
		_, err = tx.Exec(t.Context(), `LOCK TABLE idempotency IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)
		r := runCmd(t, f.with("stats", "--request-timeout", "1s")...)
		requireFailure(t, r, exitStore, "a statement did not finish within 1s, the --request-timeout")
	})
	t.Run("a role without privileges", func(t *testing.T) {
		f := postgresFixture(t)
		conn, err := pgx.Connect(t.Context(), f.flags[1])
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(t.Context(), `DO $$ BEGIN
			IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outsider') THEN CREATE ROLE outsider LOGIN; END IF;
		END $$`)
		require.NoError(t, err)
		url := strings.Replace(f.flags[1], "postgres://postgres@", "postgres://outsider@", 1)
		r := runCmd(t, "stats", "--postgres", url)
		requireFailure(t, r, exitStore, "the role needs SELECT on the table to read it")
	})
}
