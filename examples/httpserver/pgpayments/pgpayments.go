// Package pgpayments is the PostgreSQL variant of the httpserver example:
// the payments API, POST /payments, with its idempotency records and its
// ledger in one PostgreSQL database, and each payment's ledger row
// committed in one transaction with the completion of its Idempotency-Key
// (idempotency.WithTransactions, postgres.Tx): both, or neither, and once.
//
// httpapi.Middleware cannot commit a handler's writes with the completion:
// it sends the response as the handler writes it, before a commit could
// fail, and refuses idempotency.WithTransactions. This handler answers
// after the commit instead: it runs the charge through an
// idempotency.Guard, and writes its answer, the response or a problem,
// once the Guard has returned. The answers are those of the middleware
// (docs/problems.md), so httpclient.Transport retries them as it does the
// middleware's.
package pgpayments

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// ProblemPaymentNotMade is the problem type of the 503 answer to a charge
// whose ledger write failed: it was rolled back with everything of the
// request, and the key released, so that a retry with the key charges.
const ProblemPaymentNotMade = "https://github.com/retrysafe/retrysafe/blob/main/examples/httpserver/README.md#payment-not-made"

// RecordsTable is the table of the idempotency records, PaymentsTable the
// ledger's.
const (
	RecordsTable  = "idempotency"
	PaymentsTable = "payments"
)

// Schema creates the ledger table, one row per real charge: the record's
// key of the request that made it is kept with it, as a payment provider
// would keep its own idempotency key.
const Schema = `CREATE TABLE IF NOT EXISTS payments (
	payment_id      text PRIMARY KEY,
	amount          bigint NOT NULL,
	currency        text NOT NULL,
	customer        text NOT NULL,
	idempotency_key text NOT NULL,
	created_at      timestamptz NOT NULL
)`

// CreateTables creates the idempotency records' table and the ledger's,
// unless they exist.
func CreateTables(ctx context.Context, db postgres.DB) error {
	if err := postgres.CreateTable(ctx, db, RecordsTable); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("pgpayments: creating the ledger table: %w", err)
	}
	return nil
}

// ErrNoTransaction is returned by Ledger.Record outside a handler wrapped
// with idempotency.WithTransactions on the PostgreSQL store.
var ErrNoTransaction = errors.New("pgpayments: no transaction to write the ledger row in: the charge must run with idempotency.WithTransactions on the PostgreSQL store")

// Ledger is a payment.Ledger that inserts each charge in the transaction
// of the request (postgres.Tx): the row commits with the completion of
// the request's key, or not at all.
type Ledger struct{}

var _ payment.Ledger = Ledger{}

// Record inserts c in the transaction of ctx.
func (Ledger) Record(ctx context.Context, c payment.Charge) error {
	tx, ok := postgres.Tx(ctx)
	if !ok {
		return ErrNoTransaction
	}
	_, err := tx.Exec(ctx, `INSERT INTO payments (payment_id, amount, currency, customer, idempotency_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`, c.PaymentID, c.Amount, c.Currency, c.Customer, c.IdempotencyKey, c.CreatedAt)
	if err != nil {
		return fmt.Errorf("pgpayments: ledger: %w", err)
	}
	return nil
}

// Charges returns the ledger's rows, oldest first, for local runs and
// tests.
func Charges(ctx context.Context, db postgres.DB) ([]payment.Charge, error) {
	rows, err := db.Query(ctx, `SELECT payment_id, amount, currency, customer, idempotency_key, created_at FROM payments ORDER BY created_at, payment_id`)
	if err != nil {
		return nil, fmt.Errorf("pgpayments: reading the ledger: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (payment.Charge, error) {
		var c payment.Charge
		err := row.Scan(&c.PaymentID, &c.Amount, &c.Currency, &c.Customer, &c.IdempotencyKey, &c.CreatedAt)
		return c, err
	})
}

// HeaderDemoFailAfterLedger makes the charge fail after its ledger row is
// written, when Config.Demo is set: a demonstration of the rollback.
const HeaderDemoFailAfterLedger = "X-Demo-Fail-After-Ledger"

// Config holds the handler's dependencies.
type Config struct {
	// Store keeps the idempotency records: a *postgres.Store on a
	// *pgxpool.Pool, the ledger's database. Required.
	Store *postgres.Store
	// Ledger records charges. Default Ledger{}; tests wrap it.
	Ledger payment.Ledger
	// NewID returns a new payment ID. Default payment.NewPaymentID.
	NewID func() string
	// ChargeTimeout bounds a charge, which runs to its end even when its
	// client goes away. Default 10 seconds.
	ChargeTimeout time.Duration
	// Demo makes the handler honour HeaderDemoFailAfterLedger. Never set
	// it in a deployment.
	Demo bool
	// Logger receives the handler's and the Guard's logs. Default
	// slog.Default().
	Logger *slog.Logger
	// Options are added to the Guard's.
	Options []idempotency.GuardOption
}

// maxBody is the largest body read: 1 MiB, the middleware's default.
const maxBody = 1 << 20

// New returns the server's handler: POST /payments, whose ledger row
// commits with the completion of its key, with a 24-hour expiry and the
// key prefix of the Lambda function (payment.KeyPrefix), and GET
// /healthz.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("pgpayments: Config.Store is required")
	}
	if cfg.Ledger == nil {
		cfg.Ledger = Ledger{}
	}
	if cfg.NewID == nil {
		cfg.NewID = payment.NewPaymentID
	}
	cfg.ChargeTimeout = cmp.Or(cfg.ChargeTimeout, 10*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	guard, err := idempotency.NewGuard(cfg.Store, append([]idempotency.GuardOption{
		idempotency.WithTransactions(),
		idempotency.WithKeyPrefix(payment.KeyPrefix),
		idempotency.WithExpiry(payment.Expiry),
		idempotency.WithLogger(cfg.Logger),
	}, cfg.Options...)...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", &handler{cfg: cfg, guard: guard})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return mux, nil
}

type handler struct {
	cfg   Config
	guard *idempotency.Guard
}

// ServeHTTP validates the request, charges once per key, and answers
// once the charge and its key have committed, or not.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := idempotencyKey(r.Header.Values("Idempotency-Key"))
	if !ok {
		writeProblem(w, httpapi.Problem{Type: httpapi.ProblemMissingKey, Title: "Idempotency key required", Status: http.StatusBadRequest,
			Detail: "A POST to /payments needs an Idempotency-Key header: one key, a string or a token of at most 255 bytes. Nothing was processed."}, 0)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeProblem(w, httpapi.Problem{Type: httpapi.ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
			Detail: "The request body could not be read whole, or is larger than " + strconv.Itoa(maxBody) + " bytes. Nothing was processed."}, 0)
		return
	}
	req, err := payment.Parse(body)
	if err != nil {
		// Refused before the key is looked at: the client may fix the body
		// and send it again with the same key.
		writeProblem(w, payment.InvalidPayment(err), 0)
		return
	}
	// The charge finishes even if the client goes away; the context keeps
	// the request's values.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.ChargeTimeout)
	defer cancel()
	res, err := h.guard.Do(ctx, key, string(body), func(ctx context.Context) ([]byte, error) {
		p, err := payment.Make(ctx, h.cfg.Ledger, h.cfg.NewID(), req, h.cfg.Logger)
		if err == nil && h.cfg.Demo {
			err = demo(r.Header)
		}
		if err != nil {
			return nil, err // the ledger row is rolled back, and the key released
		}
		return json.Marshal(p)
	})
	if err != nil {
		h.fail(ctx, w, err)
		return
	}
	var p payment.Payment
	if err := json.Unmarshal(res.Response, &p); err != nil {
		h.fail(ctx, w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/"+p.PaymentID)
	if res.Outcome == idempotency.OutcomeReplay {
		w.Header().Set(httpapi.HeaderReplayed, "true")
	}
	w.WriteHeader(http.StatusCreated)
	w.Write(res.Response)
}

// fail answers a charge that did not return a payment.
func (h *handler) fail(ctx context.Context, w http.ResponseWriter, err error) {
	var (
		inProgress *idempotency.InProgressError
		commitErr  *idempotency.CommitError
		storeErr   *idempotency.StoreError
	)
	switch {
	case errors.As(err, &inProgress):
		retryAfter := max(1, int(time.Until(inProgress.Until).Seconds()+0.999))
		writeProblem(w, httpapi.Problem{Type: httpapi.ProblemKeyInUse, Title: "Request in progress", Status: http.StatusConflict,
			Detail: "A request with the same Idempotency-Key is still being processed. Retry after the delay in Retry-After to get its response."},
			min(retryAfter, 30))
	case errors.Is(err, idempotency.ErrPayloadMismatch):
		writeProblem(w, httpapi.Problem{Type: httpapi.ProblemKeyReused, Title: "Idempotency key reused", Status: http.StatusUnprocessableEntity,
			Detail: "The Idempotency-Key was used before with another request body. Use a new key for a new request."}, 0)
	case errors.As(err, &commitErr):
		// Nothing was written (a serialization failure at COMMIT, say),
		// and the key is free; or, when Unknown, the key stays reserved
		// until its in-progress expiry, and a retry then finds out.
		h.cfg.Logger.LogAttrs(ctx, slog.LevelError, "pgpayments: the charge did not commit", slog.Bool("outcome_unknown", commitErr.Unknown), slog.Any("error", err))
		writeProblem(w, httpapi.Problem{Type: httpapi.ProblemNotCommitted, Title: "Request not committed", Status: http.StatusServiceUnavailable,
			Detail: "The payment was not committed. Retry with the same Idempotency-Key: it is charged at most once."}, 1)
	case errors.As(err, &storeErr):
		h.cfg.Logger.LogAttrs(ctx, slog.LevelError, "pgpayments: the idempotency store failed", slog.Any("error", err))
		writeProblem(w, httpapi.Problem{Type: httpapi.ProblemStoreUnavailable, Title: "Service unavailable", Status: http.StatusServiceUnavailable,
			Detail: "The request could not be processed now; nothing happened. Retry with the same Idempotency-Key."}, 1)
	default:
		// The charge's own error: its ledger row, if any, was rolled back
		// with the transaction, and the key released.
		h.cfg.Logger.LogAttrs(ctx, slog.LevelError, "pgpayments: the charge failed; nothing was written", slog.Any("error", err))
		writeProblem(w, httpapi.Problem{Type: ProblemPaymentNotMade, Title: "Payment not made", Status: http.StatusServiceUnavailable,
			Detail: "The payment could not be made, and nothing of it was written. Retry with the same Idempotency-Key."}, 1)
	}
}

// idempotencyKey returns the key of the Idempotency-Key header's values:
// one key, a string ("...", as httpclient.Transport sends it) or a bare
// token, of 1 to 255 bytes of visible ASCII.
func idempotencyKey(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	v := strings.TrimSpace(values[0])
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		unquoted, err := strconv.Unquote(v) // a string's escapes, \" and \\, are Go's too
		if err != nil {
			return "", false
		}
		v = unquoted
	}
	if v == "" || len(v) > 255 {
		return "", false
	}
	for i := range len(v) {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", false
		}
	}
	return v, true
}

// demo fails the charge after its ledger row, when the request's
// demonstration header asks.
func demo(header http.Header) error {
	if header.Get(HeaderDemoFailAfterLedger) != "" {
		return errors.New("pgpayments: failing after the ledger row, as " + HeaderDemoFailAfterLedger + " asks")
	}
	return nil
}

func writeProblem(w http.ResponseWriter, p httpapi.Problem, retryAfter int) {
	body, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings and an integer
	}
	w.Header().Set("Content-Type", httpapi.ContentTypeProblem)
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(p.Status)
	w.Write(body)
}
