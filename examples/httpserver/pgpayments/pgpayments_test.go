package pgpayments_test

// Tests of the PostgreSQL variant against a real server: each payment's
// ledger row commits with the completion of its key, or not at all.

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/httpserver/pgpayments"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/examples/payments/payment/paymenttest"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

func TestMain(m *testing.M) { pgserver.Main(m) }

const body = `{"amount":1999,"currency":"EUR","customer":"cus_42"}`

// server is the handler on a database of the test's own.
type server struct {
	url   string // of POST /payments
	pool  *pgxpool.Pool
	store *postgres.Store
}

func newServer(t *testing.T, ledger payment.Ledger) *server {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgserver.Shared(t).NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgpayments.CreateTables(t.Context(), pool))
	store, err := postgres.New(pool, pgpayments.RecordsTable)
	require.NoError(t, err)
	h, err := pgpayments.New(pgpayments.Config{Store: store, Ledger: ledger, NewID: paymenttest.IDs(), Demo: true,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{url: srv.URL + "/payments", pool: pool, store: store}
}

func (s *server) charges(t *testing.T) []payment.Charge {
	t.Helper()
	charges, err := pgpayments.Charges(t.Context(), s.pool)
	require.NoError(t, err)
	return charges
}

func (s *server) send(t *testing.T, key, body string, header ...string) paymenttest.Answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return paymenttest.Answer{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
}

func TestProtocol(t *testing.T) {
	s := newServer(t, nil)
	first := s.send(t, "order-1", body)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	assert.JSONEq(t, `{"payment_id":"pay_1","amount":1999,"currency":"EUR","customer":"cus_42"}`, first.Body)
	assert.Equal(t, "/payments/pay_1", first.Header.Get("Location"))
	assert.False(t, first.Replayed())
	again := s.send(t, `"order-1"`, body) // as httpclient.Transport sends it
	assert.Equal(t, http.StatusCreated, again.Status)
	assert.Equal(t, first.Body, again.Body)
	assert.True(t, again.Replayed())
	assert.Equal(t, "/payments/pay_1", again.Header.Get("Location"))

	reused := s.send(t, "order-1", `{"amount":2999,"currency":"EUR","customer":"cus_42"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Status)
	assert.Equal(t, httpapi.ProblemKeyReused, reused.Problem(t).Type)
	missing := s.send(t, "", body)
	assert.Equal(t, http.StatusBadRequest, missing.Status)
	assert.Equal(t, httpapi.ProblemMissingKey, missing.Problem(t).Type)

	invalid := s.send(t, "order-2", `{"amount":"ten","currency":"EUR","customer":"cus_42"}`)
	assert.Equal(t, http.StatusBadRequest, invalid.Status)
	assert.Equal(t, payment.ProblemInvalidPayment, invalid.Problem(t).Type)
	fixed := s.send(t, "order-2", body)
	assert.Equal(t, http.StatusCreated, fixed.Status, "the invalid body did not use the key up")

	large := s.send(t, "order-3", `{"customer":"`+strings.Repeat("x", 1<<20)+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, large.Status)

	charges := s.charges(t)
	require.Len(t, charges, 2)
	assert.Equal(t, "pay_1", charges[0].PaymentID)
	key, ok := strings.CutPrefix(charges[0].IdempotencyKey, payment.KeyPrefix+"#")
	assert.True(t, ok)
	assert.Len(t, key, 64, "the charge carries the record's key")
	rec, err := s.store.Get(t.Context(), charges[0].IdempotencyKey)
	require.NoError(t, err)
	assert.Equal(t, persistence.StatusCompleted, rec.Status)
}

// A charge that fails after its ledger row rolls the row back with the
// request: 503 payment-not-made, and the retry charges, once.
func TestFailureRollsTheLedgerRowBack(t *testing.T) {
	s := newServer(t, nil)
	failed := s.send(t, "order-1", body, pgpayments.HeaderDemoFailAfterLedger, "1")
	assert.Equal(t, http.StatusServiceUnavailable, failed.Status)
	assert.Equal(t, pgpayments.ProblemPaymentNotMade, failed.Problem(t).Type)
	assert.Equal(t, "1", failed.Header.Get("Retry-After"))
	assert.Empty(t, s.charges(t), "the ledger row went with the request")

	retried := s.send(t, "order-1", body)
	require.Equal(t, http.StatusCreated, retried.Status, retried.Body)
	assert.Len(t, s.charges(t), 1)
}

// A COMMIT that the database refuses (here a serialization failure,
// raised by a deferred trigger, as Aurora DSQL answers a conflict) writes
// nothing: 503 not-committed, and the retry charges, once.
func TestRefusedCommit(t *testing.T) {
	s := newServer(t, nil)
	_, err := s.pool.Exec(t.Context(), `
CREATE TABLE refusals (code text NOT NULL);
INSERT INTO refusals VALUES ('40001');
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT FROM refusals) THEN
		RAISE EXCEPTION 'conflict at commit' USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON payments DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION refuse();`)
	require.NoError(t, err)
	refused := s.send(t, "order-1", body)
	assert.Equal(t, http.StatusServiceUnavailable, refused.Status, refused.Body)
	assert.Equal(t, httpapi.ProblemNotCommitted, refused.Problem(t).Type)
	assert.Equal(t, "1", refused.Header.Get("Retry-After"))
	assert.Empty(t, s.charges(t))

	_, err = s.pool.Exec(t.Context(), `TRUNCATE refusals`)
	require.NoError(t, err)
	retried := s.send(t, "order-1", body)
	require.Equal(t, http.StatusCreated, retried.Status, retried.Body)
	assert.Len(t, s.charges(t), 1)
}

// While a charge runs, its reservation is committed and its ledger row
// is not: a duplicate is answered 409 at once, and gets the payment once
// it has committed.
func TestDuplicateWhileTheChargeRuns(t *testing.T) {
	wrote, release := make(chan struct{}), make(chan struct{})
	s := newServer(t, holding{wrote, release})
	first := make(chan paymenttest.Answer, 1)
	go func() { first <- s.send(t, "order-1", body) }()
	<-wrote
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	dup := s.send(t, "order-1", body)
	assert.Equal(t, http.StatusConflict, dup.Status)
	assert.Equal(t, httpapi.ProblemKeyInUse, dup.Problem(t).Type)
	assert.NotEmpty(t, dup.Header.Get("Retry-After"))
	var status string
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT status FROM idempotency`).Scan(&status))
	assert.Equal(t, "INPROGRESS", status, "the reservation is committed")
	assert.Empty(t, s.charges(t), "the ledger row is not, yet")

	close(release)
	a := <-first
	require.Equal(t, http.StatusCreated, a.Status, a.Body)
	again := s.send(t, "order-1", body)
	assert.Equal(t, a.Body, again.Body)
	assert.True(t, again.Replayed())
	assert.Len(t, s.charges(t), 1)
}

// holding is the ledger, whose Record waits, after its row, until release
// is closed.
type holding struct{ wrote, release chan struct{} }

func (h holding) Record(ctx context.Context, c payment.Charge) error {
	if err := (pgpayments.Ledger{}).Record(ctx, c); err != nil {
		return err
	}
	close(h.wrote)
	<-h.release
	return nil
}

func TestLedgerNeedsTheTransaction(t *testing.T) {
	err := pgpayments.Ledger{}.Record(t.Context(), payment.Charge{})
	require.ErrorIs(t, err, pgpayments.ErrNoTransaction)
}
