package postgres_test

// Tests of idempotency.WithTransactions over the PostgreSQL store, against
// a real server: a payment handler inserts its payment row in the
// transaction of postgres.Tx, which commits with the completion of its
// key, or not at all.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// payments is a payment handler whose side effect is a row of the
// payments table, written in the transaction of its key.
type payments struct {
	runs atomic.Int32
	key  atomic.Value // string: the record's key of the last run
	// after, when set, runs after the row is written, in the handler, and
	// its error is the handler's.
	after func(ctx context.Context, tx pgx.Tx) error
}

// paymentsSetup returns a pool, with the options of optFns, on a database
// with the records' table and the payments table, and a store on it.
func paymentsSetup(t *testing.T, optFns ...func(*pgxpool.Config)) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	pool := newPool(t, newDatabase(t), optFns...)
	require.NoError(t, postgres.CreateTable(t.Context(), pool, "idempotency"))
	_, err := pool.Exec(t.Context(), `CREATE TABLE payments (charge_id text PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL)`)
	require.NoError(t, err)
	return pool, newStore(t, pool)
}

func (p *payments) charge(ctx context.Context, in paytest.Payment) (paytest.Charge, error) {
	n := p.runs.Add(1)
	key, _ := idempotency.KeyFromContext(ctx)
	p.key.Store(key)
	tx, ok := postgres.Tx(ctx)
	if !ok {
		return paytest.Charge{}, errors.New("no transaction: not wrapped with idempotency.WithTransactions")
	}
	id := fmt.Sprintf("ch_%d_%s", n, rand.Text())
	if _, err := tx.Exec(ctx, `INSERT INTO payments (charge_id, order_id, amount) VALUES ($1, $2, $3)`, id, in.OrderID, in.Amount); err != nil {
		return paytest.Charge{}, err
	}
	if p.after != nil {
		if err := p.after(ctx, tx); err != nil {
			return paytest.Charge{}, err
		}
	}
	return paytest.Charge{ChargeID: id, Amount: in.Amount}, nil
}

// paymentsOf returns the charge IDs of the rows of order, committed.
func paymentsOf(t *testing.T, db postgres.DB, order string) []string {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT charge_id FROM payments WHERE order_id = $1 ORDER BY charge_id`, order)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// transactional wraps h with transactions, on store.
func transactional(t *testing.T, h func(context.Context, paytest.Payment) (paytest.Charge, error), store persistence.Store, opts ...idempotency.WrapOption) func(context.Context, paytest.Payment) (paytest.Charge, error) {
	t.Helper()
	return paytest.Wrap(t, h, store, append([]idempotency.WrapOption{idempotency.WithTransactions(), idempotency.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
}

// requireReleased fails unless the key of h's last run has no record.
func requireReleased(t *testing.T, store *postgres.Store, h *payments) {
	t.Helper()
	_, err := store.Get(t.Context(), h.key.Load().(string))
	require.ErrorIs(t, err, persistence.ErrNotFound, "the key was released")
}

// The payment row and the completion commit together; a retry replays,
// and writes nothing. A first call costs 5 round trips of the library's
// (reserve, BEGIN, complete, COMMIT, NOTIFY) and the handler's own
// statement; a replay, 1.
func TestTransactionsCommitThePaymentWithTheCompletion(t *testing.T) {
	c := &counter{}
	pool, store := paymentsSetup(t, counted(c))
	h := &payments{}
	pay := transactional(t, h.charge, store)
	p := paytest.New()

	before := c.queries.Load()
	first, err := pay(t.Context(), p)
	require.NoError(t, err)
	assert.EqualValues(t, 5+1, c.queries.Load()-before, "statements of a first call")
	before = c.queries.Load()
	again, err := pay(t.Context(), p)
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.queries.Load()-before, "statements of a replay")
	assert.Equal(t, first, again)
	assert.Equal(t, []string{first.ChargeID}, paymentsOf(t, pool, p.OrderID))
	assert.EqualValues(t, 1, h.runs.Load())
	assert.Zero(t, pool.Stat().AcquiredConns(), "no connection is left in a transaction")
}

// Through the local cache: the commit goes to PostgreSQL, and a replay in
// the same process costs no statement.
func TestTransactionsThroughTheLocalCache(t *testing.T) {
	c := &counter{}
	pool, store := paymentsSetup(t, counted(c))
	h := &payments{}
	pay := transactional(t, h.charge, memory.NewCache(store, 8))
	p := paytest.New()
	first, err := pay(t.Context(), p)
	require.NoError(t, err)
	before := c.queries.Load()
	again, err := pay(t.Context(), p)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Zero(t, c.queries.Load()-before, "a replay from the cache")
	assert.Equal(t, []string{first.ChargeID}, paymentsOf(t, pool, p.OrderID))
}

// A handler error writes nothing of the handler's and releases the key:
// the retry runs it again. A permanent error is recorded, and writes
// nothing either.
func TestTransactionsHandlerErrorWritesNothing(t *testing.T) {
	pool, store := paymentsSetup(t)
	declined := errors.New("card declined by the network")
	h := &payments{after: func(context.Context, pgx.Tx) error { return declined }}
	pay := transactional(t, h.charge, store)
	p := paytest.New()

	_, err := pay(t.Context(), p)
	require.Same(t, declined, err, "the handler's error, unchanged")
	assert.Empty(t, paymentsOf(t, pool, p.OrderID))
	requireReleased(t, store, h)

	h.after = nil
	res, err := pay(t.Context(), p)
	require.NoError(t, err)
	assert.Equal(t, []string{res.ChargeID}, paymentsOf(t, pool, p.OrderID))

	q := paytest.New()
	h.after = func(context.Context, pgx.Tx) error { return idempotency.Permanent(declined) }
	for range 2 {
		_, err = pay(t.Context(), q)
		require.Error(t, err)
	}
	assert.EqualValues(t, 3, h.runs.Load(), "the recorded error is replayed")
	assert.Empty(t, paymentsOf(t, pool, q.OrderID))
}

// A handler that panics after its write writes nothing, and releases the
// key; the panic goes on.
func TestTransactionsPanicWritesNothing(t *testing.T) {
	pool, store := paymentsSetup(t)
	h := &payments{after: func(context.Context, pgx.Tx) error { panic("after the write") }}
	pay := transactional(t, h.charge, store)
	p := paytest.New()
	require.PanicsWithValue(t, "after the write", func() { _, _ = pay(t.Context(), p) })
	assert.Empty(t, paymentsOf(t, pool, p.OrderID))
	requireReleased(t, store, h)
	assert.Zero(t, pool.Stat().AcquiredConns(), "the transaction's connection went back to the pool")

	h.after = nil
	_, err := pay(t.Context(), p)
	require.NoError(t, err)
	assert.Len(t, paymentsOf(t, pool, p.OrderID), 1)
}

// A call that ran past its in-progress expiry (its deadline: a lease
// would be renewed while the handler runs), whose key another call took
// over and completed, commits nothing: one payment row, the other call's.
// With a unique key on the order, the other call's write waits for the
// late call's transaction, which rolls back.
func TestTransactionsLateFinisherCommitsNothing(t *testing.T) {
	for _, unique := range []bool{false, true} {
		t.Run(map[bool]string{false: "no unique key", true: "a unique key on the order"}[unique], func(t *testing.T) {
			pool, store := paymentsSetup(t)
			if unique {
				_, err := pool.Exec(t.Context(), `ALTER TABLE payments ADD UNIQUE (order_id)`)
				require.NoError(t, err)
			}
			h := &payments{}
			wrote, release := make(chan struct{}), newGate(t)
			slow := &payments{after: func(context.Context, pgx.Tx) error {
				close(wrote)
				<-release.c
				return nil
			}}
			slowPay := transactional(t, slow.charge, store)
			pay := transactional(t, h.charge, store)
			p := paytest.New()

			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			late := make(chan error, 1)
			go func() { _, err := slowPay(ctx, p); late <- err }()
			<-wrote
			held, err := store.Get(t.Context(), slow.key.Load().(string))
			require.NoError(t, err)
			require.Equal(t, persistence.StatusInProgress, held.Status)
			time.Sleep(time.Until(held.InProgressExpiresAt) + time.Millisecond) // the reservation lapses

			type answer struct {
				res paytest.Charge
				err error
			}
			taken := make(chan answer, 1)
			go func() { res, err := pay(t.Context(), p); taken <- answer{res, err} }()
			if unique {
				// The call that took the key over writes the order's row,
				// and waits for the late call's uncommitted one.
				waitForActivity(t, pool, `wait_event_type = 'Lock' AND wait_event = 'transactionid'`)
				release.open()
			}
			a := <-taken
			require.NoError(t, a.err, "the call after the lapse takes the key over")
			release.open()
			err = <-late
			require.ErrorAs(t, err, new(*idempotency.CommitError))
			require.ErrorIs(t, err, persistence.ErrFenced)
			assert.Equal(t, []string{a.res.ChargeID}, paymentsOf(t, pool, p.OrderID), "one payment: the call that took over")
			again, err := pay(t.Context(), p)
			require.NoError(t, err)
			assert.Equal(t, a.res, again)
		})
	}
}

// A COMMIT that the server refuses (a deferred constraint, a
// serialization failure at commit, as on Aurora DSQL) writes nothing: the
// call fails with a *CommitError that is not Unknown, and the key is
// released, so that the retry runs the handler again.
func TestTransactionsCommitRefused(t *testing.T) {
	t.Run("deferred unique constraint", func(t *testing.T) {
		pool, store := paymentsSetup(t)
		_, err := pool.Exec(t.Context(), `ALTER TABLE payments ADD UNIQUE (order_id) DEFERRABLE INITIALLY DEFERRED`)
		require.NoError(t, err)
		p := paytest.New()
		_, err = pool.Exec(t.Context(), `INSERT INTO payments VALUES ('ch_elsewhere', $1, 1)`, p.OrderID)
		require.NoError(t, err)
		h := &payments{}
		_, err = transactional(t, h.charge, store)(t.Context(), p)
		requireNotCommitted(t, err, "23505")
		assert.Equal(t, []string{"ch_elsewhere"}, paymentsOf(t, pool, p.OrderID))
		requireReleased(t, store, h)
	})
	t.Run("serialization failure", func(t *testing.T) {
		pool, store := paymentsSetup(t)
		refuseAtCommit(t, pool, "payments", "40001")
		h := &payments{}
		pay := transactional(t, h.charge, store)
		p := paytest.New()
		_, err := pay(t.Context(), p)
		requireNotCommitted(t, err, "40001")
		assert.Empty(t, paymentsOf(t, pool, p.OrderID))
		requireReleased(t, store, h)

		_, err = pool.Exec(t.Context(), `TRUNCATE ledger_refusals`)
		require.NoError(t, err)
		res, err := pay(t.Context(), p)
		require.NoError(t, err, "the retry runs again, and commits")
		assert.Equal(t, []string{res.ChargeID}, paymentsOf(t, pool, p.OrderID))
		assert.EqualValues(t, 2, h.runs.Load())
	})
}

// requireNotCommitted fails unless err is a *CommitError that says
// nothing was written, for the server's error of SQLSTATE code.
func requireNotCommitted(t *testing.T, err error, code string) {
	t.Helper()
	var commitErr *idempotency.CommitError
	require.ErrorAs(t, err, &commitErr)
	assert.False(t, commitErr.Unknown, "nothing was written, and the error proves it")
	require.ErrorIs(t, err, persistence.ErrCommitCanceled)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, code, pgErr.Code)
}

// The connection of the handler's transaction, killed while the handler
// runs (pg_terminate_backend): nothing is written, and the key is
// released, whether the handler's next statement fails or it returns a
// result without one.
func TestTransactionsConnectionKilledDuringTheHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes bool // the handler writes again after the kill
	}{{"the handler returns a result", false}, {"the handler's next statement fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			pool, store := paymentsSetup(t)
			killed := newGate(t)
			pids := make(chan uint32, 1)
			h := &payments{after: func(ctx context.Context, tx pgx.Tx) error {
				pids <- tx.Conn().PgConn().PID()
				<-killed.c
				if tc.writes {
					_, err := tx.Exec(ctx, `UPDATE payments SET amount = amount + 1`)
					return err
				}
				return nil
			}}
			pay := transactional(t, h.charge, store)
			p := paytest.New()
			result := make(chan error, 1)
			go func() { _, err := pay(t.Context(), p); result <- err }()
			pid := <-pids
			var terminated bool
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&terminated))
			require.True(t, terminated)
			eventually(t, func() bool {
				var n int
				require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n))
				return n == 0
			})
			killed.open()

			err := <-result
			require.Error(t, err)
			if tc.writes {
				require.NotErrorAs(t, err, new(*idempotency.CommitError), "the handler's own error: %v", err)
			} else {
				var commitErr *idempotency.CommitError
				require.ErrorAs(t, err, &commitErr)
				assert.False(t, commitErr.Unknown, "COMMIT was never sent: %v", err)
				require.ErrorIs(t, err, persistence.ErrCommitCanceled)
			}
			assert.Empty(t, paymentsOf(t, pool, p.OrderID))
			requireReleased(t, store, h)

			h.after = nil
			res, err := pay(t.Context(), p)
			require.NoError(t, err, "the retry runs on a connection of its own")
			assert.Equal(t, []string{res.ChargeID}, paymentsOf(t, pool, p.OrderID))
		})
	}
}

// While the handler's transaction is open, the reservation is committed:
// a duplicate in another process sees it at once, and is answered in
// progress without waiting for the transaction.
func TestTransactionsDuplicateSeesTheReservation(t *testing.T) {
	pool, store := paymentsSetup(t)
	wrote, release := make(chan struct{}), newGate(t)
	h := &payments{after: func(context.Context, pgx.Tx) error {
		close(wrote)
		<-release.c
		return nil
	}}
	pay := transactional(t, h.charge, store)
	p := paytest.New()
	first := make(chan error, 1)
	go func() { _, err := pay(t.Context(), p); first <- err }()
	<-wrote
	waitForActivity(t, pool, `state = 'idle in transaction'`)

	// Another process: a store of its own, so no flight in common.
	elsewhere := transactional(t, (&payments{}).charge, newStore(t, pool))
	_, err := elsewhere(t.Context(), p)
	var inProgress *idempotency.InProgressError
	require.ErrorAs(t, err, &inProgress)
	assert.False(t, inProgress.Until.IsZero(), "the reservation's in-progress expiry")
	assert.Empty(t, paymentsOf(t, pool, p.OrderID), "the payment is not committed yet")

	release.open()
	require.NoError(t, <-first)
	res, err := elsewhere(t.Context(), p)
	require.NoError(t, err, "a replay once the first call committed")
	assert.Equal(t, []string{res.ChargeID}, paymentsOf(t, pool, p.OrderID))
}

// 100 concurrent calls with one key, from 100 processes (stores of their
// own): the handler runs once, and one payment row is written.
func TestTransactionsConcurrentCallsOfOneKey(t *testing.T) {
	const calls = 100
	pool, _ := paymentsSetup(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 20 })
	var others sync.WaitGroup
	others.Add(calls - 1)
	h := &payments{after: func(context.Context, pgx.Tx) error {
		others.Wait() // every other call has been answered
		return nil
	}}
	p := paytest.New()
	start := make(chan struct{})
	type answer struct {
		res paytest.Charge
		err error
	}
	answers := make(chan answer, calls)
	for range calls {
		pay := transactional(t, h.charge, newStore(t, pool))
		go func() {
			<-start
			res, err := pay(t.Context(), p)
			answers <- answer{res, err}
			if err != nil {
				others.Done()
			}
		}()
	}
	close(start)
	var results []paytest.Charge
	inProgress := 0
	for range calls {
		a := <-answers
		switch {
		case a.err == nil:
			results = append(results, a.res)
		case errors.Is(a.err, idempotency.ErrInProgress):
			inProgress++
		default:
			t.Errorf("unexpected error: %v", a.err)
		}
	}
	require.Len(t, results, 1)
	assert.Equal(t, calls-1, inProgress)
	assert.EqualValues(t, 1, h.runs.Load())
	assert.Equal(t, []string{results[0].ChargeID}, paymentsOf(t, pool, p.OrderID))
}

// Through an API Gateway HTTP API handler: the payment row commits with
// the stored response; a response that releases the key (a 5xx) writes
// nothing of the handler's; a commit the server refuses is answered 503
// not-committed, with Retry-After.
func TestTransactionsThroughAnHTTPAPIHandler(t *testing.T) {
	pool, store := paymentsSetup(t)
	var runs atomic.Int32
	failWith := 0 // the handler's status after its write, when set
	api, err := httpapi.WrapAPIGatewayV2(func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		n := runs.Add(1)
		var in paytest.Payment
		if err := json.Unmarshal([]byte(req.Body), &in); err != nil {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest}, nil
		}
		tx, ok := postgres.Tx(ctx)
		if !ok {
			return events.APIGatewayV2HTTPResponse{}, errors.New("no transaction")
		}
		id := fmt.Sprintf("ch_%s_%d", in.OrderID, n)
		if _, err := tx.Exec(ctx, `INSERT INTO payments VALUES ($1, $2, $3)`, id, in.OrderID, in.Amount); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		if failWith != 0 {
			return events.APIGatewayV2HTTPResponse{StatusCode: failWith, Body: `{"error":"upstream"}`}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: `{"charge_id":"` + id + `"}`,
			Headers: map[string]string{"Content-Type": "application/json"}}, nil
	}, store, idempotency.WithTransactions(), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	post := func(key string, p paytest.Payment) events.APIGatewayV2HTTPResponse {
		t.Helper()
		body, err := json.Marshal(p)
		require.NoError(t, err)
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/payments", Body: string(body), Headers: map[string]string{"idempotency-key": key}}
		ev.RequestContext.HTTP.Method = http.MethodPost
		resp, err := api(t.Context(), ev)
		require.NoError(t, err)
		return resp
	}

	p := paytest.New()
	first := post("key-1", p)
	require.Equal(t, http.StatusCreated, first.StatusCode, first.Body)
	again := post("key-1", p)
	assert.Equal(t, http.StatusCreated, again.StatusCode)
	assert.Equal(t, first.Body, again.Body)
	assert.Equal(t, "true", header(again.Headers, httpapi.HeaderReplayed))
	assert.Len(t, paymentsOf(t, pool, p.OrderID), 1)

	q := paytest.New()
	failWith = http.StatusBadGateway
	assert.Equal(t, http.StatusBadGateway, post("key-2", q).StatusCode)
	assert.Empty(t, paymentsOf(t, pool, q.OrderID), "a 5xx releases the key, and rolls the handler's writes back")
	failWith = 0
	assert.Equal(t, http.StatusCreated, post("key-2", q).StatusCode)
	assert.Len(t, paymentsOf(t, pool, q.OrderID), 1)

	refuseAtCommit(t, pool, "payments", "40001")
	r := paytest.New()
	refused := post("key-3", r)
	assert.Equal(t, http.StatusServiceUnavailable, refused.StatusCode, refused.Body)
	assert.Equal(t, "1", header(refused.Headers, "Retry-After"))
	var problem httpapi.Problem
	require.NoError(t, json.Unmarshal([]byte(refused.Body), &problem))
	assert.Equal(t, httpapi.ProblemNotCommitted, problem.Type)
	assert.Empty(t, paymentsOf(t, pool, r.OrderID))
	_, err = pool.Exec(t.Context(), `TRUNCATE ledger_refusals`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, post("key-3", r).StatusCode, "the key was released: the retry commits")
	assert.Len(t, paymentsOf(t, pool, r.OrderID), 1)
}

// header returns the value of header name in headers, matched without
// regard to case.
func header(headers map[string]string, name string) string {
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// gate is a channel that open closes, once; the test's end opens it, so
// that no handler waits on it past a failure.
type gate struct {
	c    chan struct{}
	once sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{c: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.c) }) }
