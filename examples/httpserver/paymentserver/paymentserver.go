// Package paymentserver is the core of the httpserver example: a net/http
// handler for POST /payments that charges a customer once per
// Idempotency-Key, however often the client retries, behind
// httpapi.Middleware. It makes the same charges as the Lambda function of
// examples/payments (package payment: the request, the ledger, the
// charge), on a server instead: ECS, EKS, App Runner, a VM, or Lambda
// behind Lambda Web Adapter.
//
// The handler is built by New from its dependencies, so tests run it
// against the memory store; the example's main package builds it from the
// environment, on DynamoDB.
package paymentserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence"
)

// ProblemPaymentFailed is the problem type of the 500 answer to a charge
// whose outcome is unknown (the ledger's write failed, and may have
// happened). It is stored, so that every retry with the key gets it again
// and none charges a second time.
const ProblemPaymentFailed = "https://github.com/retrysafe/retrysafe/blob/main/examples/httpserver/README.md#payment-failed"

// DefaultChargeTimeout bounds a charge (see Config.ChargeTimeout).
const DefaultChargeTimeout = 10 * time.Second

// Config holds the handler's dependencies.
type Config struct {
	// Store keeps the idempotency records. Required.
	Store persistence.Store
	// Ledger records charges. Required.
	Ledger payment.Ledger
	// NewID returns a new payment ID. Default payment.NewPaymentID.
	NewID func() string
	// ChargeTimeout bounds a charge. A charge runs to its end even when
	// its client goes away (net/http then cancels the request's context):
	// the client's retry asks for its outcome. Default
	// DefaultChargeTimeout.
	ChargeTimeout time.Duration
	// Logger receives the handler's and the middleware's logs. Default
	// slog.Default().
	Logger *slog.Logger
	// Options are added to the middleware's options.
	Options []idempotency.MiddlewareOption
}

// New returns the server's handler: POST /payments behind the middleware,
// with the Idempotency-Key header, a 24-hour expiry and the key prefix of
// the Lambda function (payment.KeyPrefix), and GET /healthz, for load
// balancers and Lambda Web Adapter's readiness check.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil || cfg.Ledger == nil {
		return nil, errors.New("paymentserver: Config.Store and Config.Ledger are required")
	}
	if cfg.NewID == nil {
		cfg.NewID = payment.NewPaymentID
	}
	cfg.ChargeTimeout = cmp.Or(cfg.ChargeTimeout, DefaultChargeTimeout)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	idem, err := httpapi.Middleware(cfg.Store, append([]idempotency.MiddlewareOption{
		idempotency.WithLogger(cfg.Logger),
		idempotency.WithKeyPrefix(payment.KeyPrefix),
		// A 500 of this handler says that a charge may have happened: it is
		// kept, and replayed, rather than run again.
		httpapi.WithStoreServerErrors(),
	}, cfg.Options...)...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem(&handler{cfg: cfg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return mux, nil
}

type handler struct{ cfg Config }

// ServeHTTP runs once per key: it validates the body, makes the charge and
// answers 201.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body) // read whole by the middleware already, within its limit
	if err == nil {
		var req payment.Request
		if req, err = payment.Parse(body); err == nil {
			h.charge(w, r, req)
			return
		}
	}
	// Nothing happened: the client may correct the body and send it again
	// with the same key.
	idempotency.MarkNotExecuted(r.Context())
	writeProblem(w, payment.InvalidPayment(err))
}

func (h *handler) charge(w http.ResponseWriter, r *http.Request, req payment.Request) {
	// The charge finishes even if the client goes away; the context keeps
	// the request's values, among them the idempotency key.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.ChargeTimeout)
	defer cancel()
	p, err := payment.Make(ctx, h.cfg.Ledger, h.cfg.NewID(), req, h.cfg.Logger)
	if err != nil {
		h.cfg.Logger.LogAttrs(ctx, slog.LevelError, "paymentserver: the charge failed, and may have happened", slog.Any("error", err))
		writeProblem(w, httpapi.Problem{
			Type:   ProblemPaymentFailed,
			Title:  "Payment outcome unknown",
			Status: http.StatusInternalServerError,
			Detail: "The payment may or may not have been made, and this answer is final for this Idempotency-Key. " +
				"Check the customer's payments before you send a new request, with a new key.",
		})
		return
	}
	out, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings and integers
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/"+p.PaymentID)
	w.WriteHeader(http.StatusCreated)
	w.Write(out)
}

func writeProblem(w http.ResponseWriter, p httpapi.Problem) {
	body, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings and an integer
	}
	w.Header().Set("Content-Type", httpapi.ContentTypeProblem)
	w.WriteHeader(p.Status)
	w.Write(body)
}
