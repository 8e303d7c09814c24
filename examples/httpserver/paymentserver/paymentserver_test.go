package paymentserver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/httpserver/paymentserver"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/examples/payments/payment/paymenttest"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

const body = `{"amount":1999,"currency":"EUR","customer":"cus_42"}`

func newServer(t *testing.T) (http.Handler, *paymenttest.Ledger) {
	t.Helper()
	ledger := &paymenttest.Ledger{}
	return newServerWith(t, ledger), ledger
}

func newServerWith(t *testing.T, ledger payment.Ledger) http.Handler {
	t.Helper()
	h, err := paymentserver.New(paymentserver.Config{
		Store:  memory.New(),
		Ledger: ledger,
		NewID:  paymenttest.IDs(),
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	return h
}

func send(t *testing.T, url, method, key, body string) paymenttest.Answer {
	t.Helper()
	return paymenttest.Send(t, method, url, key, body)
}

func TestProtocol(t *testing.T) {
	h, ledger := newServer(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	url := srv.URL + "/payments"

	first := send(t, url, "POST", "order-1", body)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	assert.JSONEq(t, `{"payment_id":"pay_1","amount":1999,"currency":"EUR","customer":"cus_42"}`, first.Body)
	assert.Equal(t, "/payments/pay_1", first.Header.Get("Location"))
	again := send(t, url, "POST", "order-1", body)
	assert.Equal(t, first.Body, again.Body)
	assert.Equal(t, "true", again.Header.Get(httpapi.HeaderReplayed))

	reused := send(t, url, "POST", "order-1", `{"amount":2999,"currency":"EUR","customer":"cus_42"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Status)
	assert.Equal(t, httpapi.ProblemKeyReused, reused.Problem(t).Type)
	missing := send(t, url, "POST", "", body)
	assert.Equal(t, http.StatusBadRequest, missing.Status)
	assert.Equal(t, httpapi.ProblemMissingKey, missing.Problem(t).Type)

	invalid := send(t, url, "POST", "order-2", `{"amount":"ten","currency":"EUR","customer":"cus_42"}`)
	assert.Equal(t, http.StatusBadRequest, invalid.Status)
	assert.Equal(t, payment.ProblemInvalidPayment, invalid.Problem(t).Type)
	assert.Contains(t, invalid.Problem(t).Detail, "amount must be an integer")
	fixed := send(t, url, "POST", "order-2", body)
	assert.Equal(t, http.StatusCreated, fixed.Status, "the invalid body did not use the key up")

	large := send(t, url, "POST", "order-3", `{"customer":"`+strings.Repeat("x", 1<<20)+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, large.Status)
	assert.Equal(t, httpapi.ProblemBodyTooLarge, large.Problem(t).Type)

	assert.Equal(t, http.StatusMethodNotAllowed, send(t, url, "GET", "", "").Status)
	health := send(t, srv.URL+"/healthz", "GET", "", "")
	assert.Equal(t, "ok\n", health.Body)
	assert.Len(t, ledger.Charges(), 2)
}

// A charge whose outcome is unknown answers 500, which is kept: no retry
// charges a second time.
func TestLedgerFailure(t *testing.T) {
	h, ledger := newServer(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ledger.Fail(errors.New("RequestTimeout"))
	failed := send(t, srv.URL+"/payments", "POST", "order-1", body)
	assert.Equal(t, http.StatusInternalServerError, failed.Status)
	assert.Equal(t, paymentserver.ProblemPaymentFailed, failed.Problem(t).Type)
	ledger.Fail(nil)
	again := send(t, srv.URL+"/payments", "POST", "order-1", body)
	assert.Equal(t, failed.Body, again.Body)
	assert.Equal(t, "true", again.Header.Get(httpapi.HeaderReplayed))
	assert.Equal(t, 1, ledger.Calls(), "no second attempt to charge")
}

// A client that went away does not stop its charge half way: its retry
// gets the result.
func TestChargeOutlivesTheClient(t *testing.T) {
	ledger := &paymenttest.Ledger{}
	ctx, cancel := context.WithCancel(t.Context())
	// net/http cancels the request's context when its client goes away:
	// here, as the charge begins.
	h := newServerWith(t, goneClient{ledger, cancel})
	req := httptest.NewRequestWithContext(ctx, "POST", "/payments", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", "order-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	assert.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Len(t, ledger.Charges(), 1)
	key, _ := strings.CutPrefix(ledger.Charges()[0].IdempotencyKey, payment.KeyPrefix+"#")
	assert.Len(t, key, 64, "the charge carries the record's key, under the Lambda function's prefix")
}

// goneClient cancels the request's context before each charge.
type goneClient struct {
	payment.Ledger
	cancel func()
}

func (l goneClient) Record(ctx context.Context, c payment.Charge) error {
	l.cancel()
	return l.Ledger.Record(ctx, c)
}

func TestNewErrors(t *testing.T) {
	_, err := paymentserver.New(paymentserver.Config{Ledger: &paymenttest.Ledger{}})
	assert.Error(t, err)
	_, err = paymentserver.New(paymentserver.Config{Store: memory.New(), Ledger: &paymenttest.Ledger{},
		Options: []idempotency.MiddlewareOption{idempotency.WithExpiry(0)}})
	assert.ErrorContains(t, err, "idempotency.WithExpiry(0s)")
}
