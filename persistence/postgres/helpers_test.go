package postgres_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

func TestMain(m *testing.M) { pgserver.Main(m) }

// newDatabase returns the URL of a database of the test's own on the
// shared server.
func newDatabase(t testing.TB) string {
	t.Helper()
	return pgserver.Shared(t).NewDatabase(t)
}

// newPool returns a pool on the database at url, closed when the test
// ends, with the changes of optFns to its configuration.
func newPool(t testing.TB, url string, optFns ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	for _, fn := range optFns {
		fn(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// setup returns a pool on a database of the test's own, with a table
// created by CreateTable, and a store on it.
func setup(t testing.TB, optFns ...func(*postgres.Options)) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	pool := newPool(t, newDatabase(t))
	require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency", optFns...))
	return pool, newStore(t, pool, optFns...)
}

func newStore(t testing.TB, db postgres.DB, optFns ...func(*postgres.Options)) *postgres.Store {
	t.Helper()
	s, err := postgres.New(db, "idempotency", optFns...)
	require.NoError(t, err)
	return s
}

// counter counts the statements run on a pool's connections (a
// pgx.QueryTracer), and the statements prepared.
type counter struct {
	queries, prepares atomic.Int64
}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *counter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.prepares.Add(1)
	return ctx
}

func (c *counter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// counted returns a pool option that traces the pool's statements with c.
func counted(c *counter) func(*pgxpool.Config) {
	return func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = c }
}

// testNow is a whole second, as the idempotency package sets ExpiresAt.
func testNow() time.Time { return time.Now().Truncate(time.Second) }

func newKey() string { return "test#" + rand.Text() }

func completed(rec *persistence.Record, response string) *persistence.Record {
	c := *rec
	c.Status = persistence.StatusCompleted
	c.Response = []byte(response)
	c.InProgressExpiresAt = time.Time{}
	return &c
}

func requireRecord(t testing.TB, want, got *persistence.Record) {
	t.Helper()
	require.NotNil(t, got)
	if diff := recordtest.Diff(got, want); diff != "" {
		t.Fatalf("record differs:\n%s", diff)
	}
}
