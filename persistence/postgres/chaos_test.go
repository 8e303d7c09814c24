package postgres_test

// The chaos harness (internal/testing/chaos) on PostgreSQL. The harness
// is in the root module, which has no PostgreSQL driver; its backends for
// this store are here, in the store's module.
//
// Two stores: "postgres", the plain mode, where the handler's side effect
// is in the harness's log; and "postgres-tx", the transactional mode
// (idempotency.WithTransactions), where the side effect is a row the
// handler inserts in the transaction that BeginTx began (postgres.Tx),
// which commits with the completion of its key or not at all. There, any
// repetition of a side effect that committed is a violation.
//
// Each store runs on a server of its own (pgserver.Start), since its
// disruptions reach every connection of the server:
//
//   - store_terminate_backends: pg_terminate_backend of the connections of
//     every execution environment, or of one. A statement under way fails
//     with the connection; an open transaction (the handler's) is rolled
//     back, so its commit fails: canceled when COMMIT was not sent, of
//     unknown outcome when it was. Nothing committed is lost.
//   - store_stall: every process of the server stopped (SIGSTOP) for 50 to
//     300 ms. Requests time out, and their clients close the connections;
//     a statement that reached a backend still runs when the server
//     resumes, after its client gave up: a write applied late, a COMMIT
//     whose outcome the library does not know. Nothing is lost.
//   - store_crash_restart: an immediate shutdown (the server's processes
//     end at once, as in a crash) and a start that recovers from the
//     write-ahead log. Every connection and open transaction ends. The
//     test servers run with fsync off, which loses committed data only
//     when the machine crashes (the log is in the operating system's page
//     cache, which a crash of the server's processes keeps): so the
//     harness counts no data loss, and a record or side effect lost across
//     a restart is a violation.
//
// Store faults are injected at the store interface (faultstore, under the
// probe), for transactions too: a BEGIN that fails or loses its reply, a
// COMMIT that is not sent (the transaction is rolled back), that loses its
// reply (it applied), or that is held back on its open connection and
// sent late, which a terminated backend or a restart meanwhile turns into
// a rollback (see faultstore.Store.BeginTx).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/testing/chaos"
	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// TestChaos drives Wrap, Guard and the HTTP adapter over PostgreSQL with
// injected faults and checks the invariant (chaos.Test): `go test` runs
// its short mode, `make chaos` its long mode (CHAOS_STORES).
func TestChaos(t *testing.T) {
	chaos.Test(t, []string{"postgres", "postgres-tx"}, newChaosBackend)
}

func newChaosBackend(t *testing.T, name string) chaos.Backend {
	switch name {
	case "postgres":
		return startChaosBackend(t, name, false)
	case "postgres-tx":
		return startChaosBackend(t, name, true)
	}
	t.Fatalf("unknown store %q (want postgres or postgres-tx; the other stores are in internal/testing/chaos)", name)
	return nil
}

// The connections of execution environment n are named envApp+n
// (application_name), those the backend reads with adminApp, so that a
// termination reaches the environments' only.
const (
	envApp   = "chaos-env-"
	adminApp = "chaos-admin"
)

// effectsSQL writes a side effect in the handler's transaction. It takes
// the key's advisory lock, shared, so that CommittedEffects, which takes
// it exclusive, waits for every open transaction of the key: a COMMIT
// that a stalled server runs after its client gave up is seen.
const effectsSQL = `WITH key_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0)))
INSERT INTO side_effects (key, inv, answer) SELECT $1, $2, $3 FROM key_lock`

type chaosBackend struct {
	tb    testing.TB
	name  string
	tx    bool
	srv   *pgserver.Server
	url   string
	admin *pgxpool.Pool
	envs  atomic.Int64 // environments created
}

func startChaosBackend(t *testing.T, name string, tx bool) *chaosBackend {
	t.Helper()
	srv := pgserver.Start(t)
	b := &chaosBackend{tb: t, name: name, tx: tx, srv: srv, url: srv.NewDatabase(t)}
	b.admin = b.newPool(t, adminApp)
	ctx := t.Context()
	if err := postgres.CreateTable(ctx, b.admin, "idempotency"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admin.Exec(ctx, `CREATE TABLE side_effects (
	key text NOT NULL, inv text NOT NULL, answer text NOT NULL, PRIMARY KEY (key, inv))`); err != nil {
		t.Fatal(err)
	}
	return b
}

// newPool returns a pool whose connections are named app, closed when
// the test ends. Each call in transactional mode takes two connections
// (its transaction's, and one for the store's statements), so the pool
// has room for the calls an environment runs at once.
func (b *chaosBackend) newPool(tb testing.TB, app string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func (b *chaosBackend) Name() string { return b.name }

// NewStore implements chaos.Backend: a store on a pool of the
// environment's own.
func (b *chaosBackend) NewStore(env *chaos.Env) (persistence.Store, error) {
	for {
		n := b.envs.Load()
		if int64(env.ID) < n || b.envs.CompareAndSwap(n, int64(env.ID)+1) {
			break
		}
	}
	pool := b.newPool(b.tb, envApp+strconv.Itoa(env.ID))
	return postgres.New(pool, "idempotency", func(o *postgres.Options) {
		o.MaxResponseSize = chaos.ResponseLimit
	})
}

// Transactional implements chaos.TransactionalBackend.
func (b *chaosBackend) Transactional() bool { return b.tx }

// StageEffect implements chaos.TransactionalBackend: a row of
// side_effects, inserted in the handler's transaction. A write that the
// connection or its context failed is a *chaos.TransientError; an error
// the server gave for the statement itself is not.
func (b *chaosBackend) StageEffect(ctx context.Context, key, inv, answer string) error {
	tx, ok := postgres.Tx(ctx)
	if !ok {
		return errors.New("the handler's context carries no transaction")
	}
	_, err := tx.Exec(ctx, effectsSQL, key, inv, answer)
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "57": // connection exception, operator intervention
		default:
			return err
		}
	}
	return &chaos.TransientError{Invocation: inv, Err: err}
}

// CommittedEffects implements chaos.TransactionalBackend. It waits for
// the key's open transactions (see effectsSQL), and tries again while the
// server is stalled or restarting.
func (b *chaosBackend) CommittedEffects(ctx context.Context, key string) (map[string]string, error) {
	for {
		committed, err := b.readEffects(ctx, key)
		if err == nil || ctx.Err() != nil {
			return committed, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *chaosBackend) readEffects(ctx context.Context, key string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	committed := map[string]string{}
	err := pgx.BeginFunc(ctx, b.admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key); err != nil {
			return err
		}
		// A statement of its own, at READ COMMITTED: its snapshot is
		// taken once the lock is held.
		rows, err := tx.Query(ctx, `SELECT inv, answer FROM side_effects WHERE key = $1`, key)
		if err != nil {
			return err
		}
		var inv, answer string
		_, err = pgx.ForEachRow(rows, []any{&inv, &answer}, func() error {
			committed[inv] = answer
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return committed, nil
}

// Disruptions implements chaos.Backend (see the top of the file).
func (b *chaosBackend) Disruptions() []chaos.Disruption {
	return []chaos.Disruption{
		{Kind: "store_terminate_backends", Do: b.terminate},
		{Kind: "store_stall", Do: b.stall},
		{Kind: "store_crash_restart", Do: b.restart},
	}
}

// terminate ends the connections of every environment, or of one.
func (b *chaosBackend) terminate(rng *rand.Rand) {
	app := envApp + "%"
	if n := b.envs.Load(); n > 0 && rng.IntN(2) == 0 {
		app = envApp + strconv.Itoa(rng.IntN(int(n)))
	}
	var err error
	// After a restart, the pool's first attempt may find its connection
	// gone.
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = b.admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND application_name LIKE $1`, app)
		cancel()
		if err == nil {
			return
		}
	}
	b.tb.Errorf("terminating the connections of %s: %v", app, err)
}

func (b *chaosBackend) stall(rng *rand.Rand) {
	if err := b.srv.Freeze(); err != nil {
		b.tb.Fatal(err)
	}
	time.Sleep(50*time.Millisecond + time.Duration(rng.Int64N(int64(250*time.Millisecond))))
	if err := b.srv.Thaw(); err != nil {
		b.tb.Fatal(err)
	}
}

func (b *chaosBackend) restart(*rand.Rand) {
	if err := b.srv.Restart(context.Background()); err != nil {
		b.tb.Fatal(fmt.Errorf("restarting PostgreSQL: %w", err))
	}
}
