package postgres_test

import (
	"context"
	"crypto/rand"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

func TestConformance(t *testing.T) {
	_, store := setup(t)
	storetest.Run(t, func(*testing.T) persistence.Store { return store })
}

// TestConformanceSchema runs the suite on a table in a schema of its own,
// next to a table of the same name in public that must stay empty.
func TestConformanceSchema(t *testing.T) {
	pool := newPool(t, newDatabase(t))
	ctx := t.Context()
	_, err := pool.Exec(ctx, `CREATE SCHEMA "App Records"`)
	if err != nil {
		t.Fatal(err)
	}
	inSchema := func(o *postgres.Options) { o.Schema = "App Records" }
	for _, fns := range [][]func(*postgres.Options){{inSchema}, nil} {
		if err := postgres.CreateTable(ctx, pool, "idempotency", fns...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM public.idempotency`).Scan(&n); err != nil || n != 0 {
			t.Errorf("public.idempotency: %d records (%v), want none", n, err)
		}
	})
	store := newStore(t, pool, inSchema)
	storetest.Run(t, func(*testing.T) persistence.Store { return store })
}

func TestNewRefusesBadArguments(t *testing.T) {
	pool := newPool(t, "postgres://127.0.0.1:1/none") // never connected
	for _, tc := range []struct {
		name  string
		db    postgres.DB
		table string
		opt   func(*postgres.Options)
		want  string
	}{
		{"nil DB", nil, "idempotency", nil, "nil DB"},
		{"empty table", pool, "", nil, "empty table name"},
		{"long table", pool, strings.Repeat("t", 64), nil, "longer than"},
		{"long schema", pool, "idempotency", func(o *postgres.Options) { o.Schema = strings.Repeat("s", 64) }, "longer than"},
		{"negative MaxResponseSize", pool, "idempotency", func(o *postgres.Options) { o.MaxResponseSize = -1 }, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fns []func(*postgres.Options)
			if tc.opt != nil {
				fns = append(fns, tc.opt)
			}
			_, err := postgres.New(tc.db, tc.table, fns...)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "persistence/postgres: "), err.Error())
		})
	}
}

// TestCreateTable: CreateTable runs Schema's statements for the table's
// name, again without error, and makes the documented columns and
// indexes.
func TestCreateTable(t *testing.T) {
	sql, err := postgres.CreateTableSQL("idempotency")
	require.NoError(t, err)
	require.Equal(t, postgres.Schema, sql, "CreateTable's statements for the default name are not Schema's")
	sql, err = postgres.CreateTableSQL("records", func(o *postgres.Options) { o.Schema = "app" })
	require.NoError(t, err)
	require.Contains(t, sql, `CREATE TABLE IF NOT EXISTS "app"."records" (`)
	require.Contains(t, sql, `CREATE INDEX IF NOT EXISTS "records_in_progress_idx" ON "app"."records" (`)
	require.NotContains(t, strings.ReplaceAll(sql, `named "idempotency"`, ""), `"idempotency`)
	_, err = postgres.CreateTableSQL(strings.Repeat("t", 48))
	require.ErrorContains(t, err, "too long")

	pool := newPool(t, newDatabase(t))
	ctx := t.Context()
	require.NoError(t, postgres.CreateTable(ctx, pool, "idempotency"))
	require.NoError(t, postgres.CreateTable(ctx, pool, "idempotency"), "a second CreateTable")

	rows, err := pool.Query(ctx, `SELECT column_name, data_type, is_nullable, coalesce(collation_name, '')
		FROM information_schema.columns WHERE table_name = 'idempotency' ORDER BY ordinal_position`)
	require.NoError(t, err)
	var columns []string
	for rows.Next() {
		var name, typ, nullable, collation string
		require.NoError(t, rows.Scan(&name, &typ, &nullable, &collation))
		columns = append(columns, strings.TrimSpace(name+" "+typ+" "+nullable+" "+collation))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{
		"id text NO C",
		"status text NO",
		"expiration bigint NO",
		"in_progress_expiration bigint YES",
		"validation text YES",
		"data bytea YES",
		"owner_token text NO",
		"error_type text YES",
		"error_message text YES",
		"response_omitted boolean NO",
		"held boolean NO",
	}, columns)

	rows, err = pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'idempotency' ORDER BY indexname`)
	require.NoError(t, err)
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"idempotency_expiration_idx", "idempotency_in_progress_idx", "idempotency_pkey"}, indexes)
}

// TestTableLayout pins the documented columns and encodings, which
// operators read with psql.
func TestTableLayout(t *testing.T) {
	pool, store := setup(t)
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0)
	rec := &persistence.Record{
		Key:                 "orders.handler#abc",
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour),
		InProgressExpiresAt: now.Add(1234*time.Millisecond + 300*time.Microsecond), // stored rounded up
		PayloadHash:         "h",
		Token:               "t1",
	}
	require.NoError(t, store.Put(ctx, rec, now))
	raw := func() string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT row(id, status, expiration, in_progress_expiration, validation, data, owner_token, error_type, error_message, response_omitted)::text FROM idempotency`).Scan(&s))
		return s
	}
	require.Equal(t, `(orders.handler#abc,INPROGRESS,1800003600,1800000001235,h,,t1,,,f)`, raw())

	done := *rec
	done.Status = persistence.StatusCompleted
	done.InProgressExpiresAt = time.Time{}
	done.Response = []byte(`{"id":1}`)
	done.ErrorType, done.ErrorMessage = "CardDeclinedError", "declined"
	require.NoError(t, store.Update(ctx, &done))
	require.Equal(t, `(orders.handler#abc,COMPLETED,1800003600,,h,"\\x7b226964223a317d",t1,CardDeclinedError,declined,f)`, raw())
}

// TestCallersClockDecides: expiry is decided with the now the caller
// passes, not the server's clock.
func TestCallersClockDecides(t *testing.T) {
	_, store := setup(t)
	ctx := t.Context()
	real := testNow()

	// Live by the server's clock, expired by the caller's.
	rec := recordtest.InProgress(newKey(), real)
	require.NoError(t, store.Put(ctx, rec, real))
	later := real.Add(2 * time.Hour)
	next := recordtest.InProgress(rec.Key, later)
	require.NoError(t, store.Put(ctx, next, later), "a reservation at a now past the record's expiry")
	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, next, got)

	// Expired by the server's clock, live by the caller's.
	past := real.Add(-2 * time.Hour)
	old := recordtest.InProgress(newKey(), past)
	require.NoError(t, store.Put(ctx, old, past))
	var conflict *persistence.ConflictError
	require.ErrorAs(t, store.Put(ctx, recordtest.InProgress(old.Key, past), past.Add(time.Second)), &conflict)
	requireRecord(t, old, conflict.Existing)
}

func TestMaxResponseSize(t *testing.T) {
	_, store := setup(t, func(o *postgres.Options) { o.MaxResponseSize = 8 })
	ctx := t.Context()
	now := testNow()

	small := recordtest.InProgress(newKey(), now)
	require.NoError(t, store.Put(ctx, small, now))
	require.NoError(t, store.Update(ctx, completed(small, "12345678")))

	large := recordtest.InProgress(newKey(), now)
	require.NoError(t, store.Put(ctx, large, now))
	done := completed(large, "123456789")
	require.ErrorIs(t, store.Update(ctx, done), persistence.ErrResponseOmitted)
	want := *done
	want.Response, want.ResponseOmitted = nil, true
	got, err := store.Get(ctx, large.Key)
	require.NoError(t, err)
	requireRecord(t, &want, got)
	// Sent again (a lost reply): done, and omitted as before.
	require.ErrorIs(t, store.Update(ctx, done), persistence.ErrResponseOmitted)
}

// TestErrorTextKept: a recorded error's text is kept as it is, and text
// that a text column cannot hold (invalid UTF-8, NUL) with U+FFFD in
// place of the bytes it cannot.
func TestErrorTextKept(t *testing.T) {
	_, store := setup(t)
	ctx := t.Context()
	now := testNow()
	for _, tc := range []struct{ in, want string }{
		{"card declined – réessayez 🚀", "card declined – réessayez 🚀"},
		{"bad \xff byte and a \x00 NUL", "bad \uFFFD byte and a \uFFFD NUL"},
	} {
		rec := recordtest.InProgress(newKey(), now)
		require.NoError(t, store.Put(ctx, rec, now))
		done := completed(rec, "")
		done.ErrorType, done.ErrorMessage = "E\xff", tc.in
		require.NoError(t, store.Update(ctx, done))
		got, err := store.Get(ctx, rec.Key)
		require.NoError(t, err)
		require.Equal(t, tc.want, got.ErrorMessage)
		require.Equal(t, "E\uFFFD", got.ErrorType)
	}
}

// TestFailuresAreNotAnswers: a store whose server is gone fails every
// operation with an error of its own, never an answer of the contract.
func TestFailuresAreNotAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	store := newStore(t, newPool(t, "postgres://postgres@"+addr+"/none?connect_timeout=5"))
	ctx := t.Context()
	now := testNow()
	rec := recordtest.InProgress(newKey(), now)
	_, getErr := store.Get(ctx, rec.Key)
	_, sweepErr := store.Sweep(ctx, now, 1)
	for _, err := range []error{
		store.Put(ctx, rec, now),
		getErr,
		store.Update(ctx, completed(rec, "x")),
		store.Delete(ctx, rec.Key, rec.Token),
		store.DeleteRecord(ctx, rec),
		store.List(ctx, "", 0, func([]*persistence.Record) error { return nil }),
		sweepErr,
	} {
		require.Error(t, err)
		require.NotErrorIs(t, err, persistence.ErrConflict)
		require.NotErrorIs(t, err, persistence.ErrFenced)
		require.NotErrorIs(t, err, persistence.ErrNotFound)
		require.NotErrorIs(t, err, persistence.ErrChanged)
		require.True(t, strings.HasPrefix(err.Error(), "persistence/postgres: "), err.Error())
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct {
		prefix, want string
		ok           bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"payments#", "payments$", true},
		{"ab\x7f", "ab\u0080", true},
		{"é", "ê", true},
		{"a\uD7FF", "a\uE000", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF\U0010FFFF", "", false},
		{"a\xff", "", false},
	} {
		got, ok := postgres.PrefixEnd(tc.prefix)
		require.Equal(t, tc.ok, ok, "%q", tc.prefix)
		require.Equal(t, tc.want, got, "%q", tc.prefix)
		if ok {
			require.True(t, utf8.ValidString(got))
			for _, s := range []string{tc.prefix, tc.prefix + "\x00", tc.prefix + "\U0010FFFF\U0010FFFF"} {
				require.Less(t, s, got)
			}
		}
	}
}

// TestConformanceLeastPrivilege runs the suite, the operator's methods
// and the sweep as a role with the privileges the package documentation
// lists, and no more.
func TestConformanceLeastPrivilege(t *testing.T) {
	url := newDatabase(t)
	admin := newPool(t, url)
	ctx := t.Context()
	_, err := admin.Exec(ctx, `CREATE SCHEMA app`)
	require.NoError(t, err)
	require.NoError(t, postgres.CreateTable(ctx, admin, "idempotency", func(o *postgres.Options) { o.Schema = "app" }))
	// Roles belong to the server, which other tests share.
	role := "idempotency_writer_" + strings.ToLower(rand.Text()[:8])
	for _, sql := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT USAGE ON SCHEMA app TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON app.idempotency TO ` + role,
	} {
		_, err := admin.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	pool := newPool(t, url, func(c *pgxpool.Config) { c.ConnConfig.User = role })
	store := newStore(t, pool, func(o *postgres.Options) { o.Schema = "app" })
	t.Run("Operators", func(t *testing.T) {
		now := testNow()
		rec := recordtest.InProgress(newKey(), now)
		require.NoError(t, store.Put(ctx, rec, now))
		require.NoError(t, store.List(ctx, "test#", 0, func([]*persistence.Record) error { return nil }))
		require.NoError(t, store.ListStuck(ctx, now, 0, func([]*persistence.Record) error { return nil }))
		_, err := store.Sweep(ctx, now, 10)
		require.NoError(t, err)
		got, err := store.Get(ctx, rec.Key)
		require.NoError(t, err)
		require.NoError(t, store.DeleteRecord(ctx, got))
		// CreateTable needs CREATE on the schema, which the role lacks.
		require.ErrorContains(t, postgres.CreateTable(ctx, pool, "other", func(o *postgres.Options) { o.Schema = "app" }), "permission denied")
	})
	storetest.Run(t, func(*testing.T) persistence.Store { return store })
}

// TestConformanceQueryExecModes runs the suite with pgx's modes that
// prepare no statement, as behind PgBouncer in transaction mode.
func TestConformanceQueryExecModes(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			c := &counter{}
			pool := newPool(t, newDatabase(t), counted(c), func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = mode })
			require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency"))
			store := newStore(t, pool)
			t.Cleanup(func() {
				if n := c.prepares.Load(); n != 0 {
					t.Errorf("%d statements prepared in mode %s", n, mode)
				}
			})
			storetest.Run(t, func(*testing.T) persistence.Store { return store })
		})
	}
}
