// Package payment is the core of the payments example: an API Gateway HTTP
// API handler for POST /payments that charges a customer once per
// Idempotency-Key, however often the client retries.
//
// Every real execution writes one new item, with a fresh payment ID, to a
// ledger (see Ledger and DynamoDBLedger), so a double charge would show as
// two items. The handler is built by New from its dependencies (the
// idempotency store, the ledger and an ID generator), so tests run
// it against the memory store; the example's main package builds it from
// the environment (EnvIdempotencyTable, EnvPaymentsTable) for Lambda.
//
// Requests whose body is not a valid payment are answered 400 with a
// problem+json body of type ProblemInvalidPayment before the idempotency
// layer sees them: the HTTP adapter stores 4xx responses and replays them,
// and a client that fixes its body must be able to send it with the same
// key.
package payment

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence"
)

// Environment variables that the example's main package reads. The AWS SDK
// reads its own (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, credentials).
const (
	// EnvIdempotencyTable names the DynamoDB table of idempotency records.
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"
	// EnvPaymentsTable names the DynamoDB table of the ledger.
	EnvPaymentsTable = "PAYMENTS_TABLE"
	// EnvDemoDelay set to 1 makes the function honour HeaderDemoDelay and
	// HeaderDemoDelayAfterLedger (see Config.DemoDelay). Never set it in a
	// deployment.
	EnvDemoDelay = "PAYMENTS_DEMO_DELAY"
	// EnvTransactions set to 0 writes each ledger entry directly, before
	// the completion of the payment's key, for servers without
	// TransactWriteItems (dynalite). By default the entry is staged, and
	// commits with the completion (see Config.Transactions).
	EnvTransactions = "PAYMENTS_TRANSACTIONS"
	// EnvSteps set to 1 runs the charge as steps (see Config.Steps), with
	// PAYMENTS_TRANSACTIONS=0.
	EnvSteps = "PAYMENTS_STEPS"
)

// EnvVars lists the variables the example's main package reads, except
// EnvDemoDelay and EnvTransactions, which only local runs set.
var EnvVars = []string{EnvIdempotencyTable, EnvPaymentsTable}

// HeaderDemoDelay is the request header that delays the charge by a Go
// duration ("5s"), when Config.DemoDelay is set: a demonstration aid, to
// make an invocation slow enough to time out before it charges.
const HeaderDemoDelay = "X-Demo-Delay"

// HeaderDemoDelayAfterLedger is HeaderDemoDelay after the ledger entry is
// written (or staged), before the charge's key completes: an invocation
// that times out there has made its side effect, and not recorded it.
const HeaderDemoDelayAfterLedger = "X-Demo-Delay-After-Ledger"

// Expiry is how long a key is remembered: a retry within 24 hours gets
// the first response. It is the HTTP adapter's default.
const Expiry = httpapi.DefaultExpiry

// KeyPrefix is the prefix of the idempotency records of this API.
const KeyPrefix = "payments"

// ProblemInvalidPayment is the problem type of the 400 answer to a body
// that is not a valid payment request.
const ProblemInvalidPayment = "https://github.com/retrysafe/retrysafe/blob/main/examples/payments/README.md#invalid-payment"

// Request is the body of POST /payments.
type Request struct {
	// Amount is in the currency's minor unit (cents), positive.
	Amount int64 `json:"amount"`
	// Currency is an ISO 4217 code: three upper-case letters.
	Currency string `json:"currency"`
	// Customer identifies the customer charged.
	Customer string `json:"customer"`
}

// Payment is a charge: the 201 response body and the ledger's item.
type Payment struct {
	// PaymentID is new for every real charge.
	PaymentID string `json:"payment_id"`
	// Amount, Currency and Customer are the request's.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Customer string `json:"customer"`
}

// Charge is what the ledger records of one real execution.
type Charge struct {
	Payment
	// IdempotencyKey is the idempotency record's key (a hash of the
	// Idempotency-Key header), which a real payment provider would receive
	// as its own idempotency key.
	IdempotencyKey string
	// CreatedAt is when the charge was made.
	CreatedAt time.Time
}

// Ledger records charges. Record must write exactly one entry per call,
// and be safe to retry internally (the DynamoDB ledger conditions its
// write on the payment ID being new).
type Ledger interface {
	Record(ctx context.Context, c Charge) error
}

// Config holds the handler's dependencies.
type Config struct {
	// Store keeps the idempotency records. Required.
	Store persistence.Store
	// Ledger records charges. Required.
	Ledger Ledger
	// NewID returns a new payment ID. Default NewPaymentID.
	NewID func() string
	// DemoDelay makes the handler honour HeaderDemoDelay and
	// HeaderDemoDelayAfterLedger. Off by default; main sets it from
	// EnvDemoDelay.
	DemoDelay bool
	// Transactions wraps the charge with idempotency.WithTransactions: the
	// writes the ledger stages (DynamoDBLedger.Staged) commit with the
	// completion of the payment's key, so that an invocation that dies
	// between the two leaves no entry, and the retry writes exactly one.
	// The store must commit staged writes (the DynamoDB store, on a server
	// with TransactWriteItems).
	Transactions bool
	// Steps runs the charge as three steps (idempotency.Step): the
	// provider's charge, which gives the payment ID, its ledger entry,
	// and the receipt email. An invocation that dies between two steps
	// leaves the finished ones stored, and the retry resumes after them:
	// the ledger gets one entry without transactions. It excludes
	// Transactions, whose staged writes commit with the call, not with
	// the step.
	Steps bool
	// Logger receives the handler's and the adapter's logs. Default
	// slog.Default().
	Logger *slog.Logger
	// Options are added to the HTTP adapter's options.
	Options []idempotency.HandlerOption
}

// New returns the handler of POST /payments: it validates the body, then
// charges through the HTTP adapter, with the Idempotency-Key header and
// the adapter's 24-hour expiry.
func New(cfg Config) (httpapi.APIGatewayV2Handler, error) {
	if cfg.Store == nil || cfg.Ledger == nil {
		return nil, errors.New("payment: Config.Store and Config.Ledger are required")
	}
	if cfg.Steps && cfg.Transactions {
		return nil, errors.New("payment: Config.Steps and Config.Transactions exclude each other")
	}
	if cfg.NewID == nil {
		cfg.NewID = NewPaymentID
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handler{cfg: cfg}
	opts := []idempotency.HandlerOption{
		idempotency.WithLogger(cfg.Logger),
		idempotency.WithKeyPrefix(KeyPrefix),
	}
	if cfg.Transactions {
		opts = append(opts, idempotency.WithTransactions())
	}
	opts = append(opts, cfg.Options...)
	charge, err := httpapi.WrapAPIGatewayV2(h.charge, cfg.Store, opts...)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		// The route is POST /payments; a function URL or another route in
		// front of the function must not reach the charge unprotected.
		if m := req.RequestContext.HTTP.Method; !strings.EqualFold(m, http.MethodPost) {
			return methodNotAllowed(m), nil
		}
		// Invalid bodies are refused before the key is looked at: they
		// cost no store request.
		if _, err := parse(req); err != nil {
			return invalid(err), nil
		}
		return charge(ctx, req)
	}, nil
}

type handler struct{ cfg Config }

// charge runs once per key: it makes the charge and answers 201.
func (h *handler) charge(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	body, err := parse(req)
	if err != nil {
		// Validated before, so not reached; should it be, the refusal is
		// not stored, and the client may correct the body and send it
		// again with the same key.
		idempotency.MarkNotExecuted(ctx)
		return invalid(err), nil
	}
	if h.cfg.DemoDelay {
		if err := h.demoDelay(ctx, req, HeaderDemoDelay); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	if h.cfg.Steps {
		return h.chargeInSteps(ctx, req, body)
	}
	p, err := Make(ctx, h.cfg.Ledger, h.cfg.NewID(), body, h.cfg.Logger)
	if err != nil {
		// Whether the ledger applied the write is unknown: record the
		// failure instead of releasing the key, so that no retry can
		// charge a second time. Retries get 500 recorded-error and the
		// client checks the payment's state instead.
		return events.APIGatewayV2HTTPResponse{}, idempotency.Permanent(err)
	}
	if h.cfg.DemoDelay {
		if err := h.demoDelay(ctx, req, HeaderDemoDelayAfterLedger); err != nil {
			// Past the deadline, as if the invocation had died here: the
			// key is not completed (a direct ledger write has happened; a
			// staged one never will).
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	return created(p)
}

// chargeInSteps makes the charge as three steps: the provider's charge,
// its ledger entry and the receipt email. A retry replays the stored
// steps and runs the others. The ledger's write is conditioned on the
// payment ID being new, so a ledger step that failed can run again.
func (h *handler) chargeInSteps(ctx context.Context, req events.APIGatewayV2HTTPRequest, r Request) (events.APIGatewayV2HTTPResponse, error) {
	p, err := idempotency.Step(ctx, "charge", func(ctx context.Context) (Payment, error) {
		// A payment provider would get the step's key
		// (idempotency.StepKey) as its own idempotency key.
		return Payment{PaymentID: h.cfg.NewID(), Amount: r.Amount, Currency: r.Currency, Customer: r.Customer}, nil
	})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	_, err = idempotency.Step(ctx, "ledger", func(ctx context.Context) (string, error) {
		key, _ := idempotency.KeyFromContext(ctx)
		return p.PaymentID, h.cfg.Ledger.Record(ctx, Charge{Payment: p, IdempotencyKey: key, CreatedAt: time.Now()})
	})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("payment: recording charge %s: %w", p.PaymentID, err)
	}
	if h.cfg.DemoDelay {
		if err := h.demoDelay(ctx, req, HeaderDemoDelayAfterLedger); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	_, err = idempotency.Step(ctx, "email", func(ctx context.Context) (bool, error) {
		h.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "payment: receipt sent",
			slog.String("payment_id", p.PaymentID), slog.String("customer", p.Customer))
		return true, nil
	})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return created(p)
}

// created answers 201 with the payment p.
func created(p Payment) (events.APIGatewayV2HTTPResponse, error) {
	out, err := json.Marshal(p)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusCreated,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(out),
	}, nil
}

// Make makes the charge that r asks for: one new item in ledger, with the
// payment ID id and the idempotency key of ctx (the record's, from
// idempotency.KeyFromContext), which a real payment provider would receive
// as its own idempotency key. It is the side effect that must happen once
// per Idempotency-Key, shared by the Lambda handler and the net/http
// server of examples/httpserver.
func Make(ctx context.Context, ledger Ledger, id string, r Request, logger *slog.Logger) (Payment, error) {
	p := Payment{PaymentID: id, Amount: r.Amount, Currency: r.Currency, Customer: r.Customer}
	key, _ := idempotency.KeyFromContext(ctx)
	if err := ledger.Record(ctx, Charge{Payment: p, IdempotencyKey: key, CreatedAt: time.Now()}); err != nil {
		return Payment{}, fmt.Errorf("payment: recording charge %s: %w", p.PaymentID, err)
	}
	logger.LogAttrs(ctx, slog.LevelInfo, "payment: charged",
		slog.String("payment_id", p.PaymentID), slog.Int64("amount", p.Amount), slog.String("currency", p.Currency))
	return p, nil
}

// demoDelay waits as long as the header name asks, as work that does not
// watch its context: an invocation whose deadline comes first is killed
// meanwhile by the runtime (the emulator's classic mode), which the tests
// and the demo show. The wait ignores the deadline so that the kill, not
// a handler error at the same moment, ends the invocation, whatever the
// load: a 30-second delay outlasts a 2-second timeout by 28 seconds. An
// invocation that outlives its deadline all the same (the emulator's
// multi-concurrency mode kills nothing) fails after the wait, and never
// goes on.
func (h *handler) demoDelay(ctx context.Context, req events.APIGatewayV2HTTPRequest, name string) error {
	v := header(req.Headers, name)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return nil
	}
	h.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "payment: demo delay", slog.String("header", name), slog.Duration("delay", d))
	time.Sleep(d)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("payment: demo delay: %w", err)
	}
	return nil
}

// header returns the value of the request header name, matched without
// regard to case (HTTP APIs send lower-case names).
func header(headers map[string]string, name string) string {
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// parse decodes and validates the body of req.
func parse(req events.APIGatewayV2HTTPRequest) (Request, error) {
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
			return Request{}, errors.New("the body is not valid base64")
		}
	}
	return Parse(body)
}

// Parse decodes and validates the body of a request: one JSON object with
// the members of Request and no others. The error says what is wrong, for
// the client (see InvalidPayment).
func Parse(body []byte) (Request, error) {
	var r Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, errors.New(jsonError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, errors.New("the body has more than one JSON value")
	}
	var problems []string
	if r.Amount <= 0 {
		problems = append(problems, "amount must be a positive integer (in the currency's minor unit)")
	}
	if !isCurrency(r.Currency) {
		problems = append(problems, "currency must be an ISO 4217 code of three upper-case letters")
	}
	if strings.TrimSpace(r.Customer) == "" || len(r.Customer) > 255 {
		problems = append(problems, "customer must be a non-empty string of at most 255 bytes")
	}
	if len(problems) > 0 {
		return Request{}, errors.New(strings.Join(problems, "; "))
	}
	return r, nil
}

// jsonError makes a decoding error readable by a client: which member has
// the wrong type, rather than Go's type names.
func jsonError(err error) string {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return "the body must be a JSON object"
	case errors.As(err, &typeErr):
		switch typeErr.Type.Kind() {
		case reflect.Int64:
			return typeErr.Field + " must be an integer"
		case reflect.String:
			return typeErr.Field + " must be a string"
		}
		return typeErr.Field + " has the wrong type"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range 3 {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// InvalidPayment returns the problem that answers a body that Parse
// refused with err: 400, of type ProblemInvalidPayment.
func InvalidPayment(err error) httpapi.Problem {
	return httpapi.Problem{
		Type:   ProblemInvalidPayment,
		Title:  "Invalid payment request",
		Status: http.StatusBadRequest,
		Detail: "The request body is not a valid payment: " + err.Error() + ". Fix it and send it again; the Idempotency-Key may be reused.",
	}
}

// invalid returns the 400 answer to an invalid body.
func invalid(err error) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(InvalidPayment(err))
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusBadRequest,
		Headers:    map[string]string{"Content-Type": httpapi.ContentTypeProblem},
		Body:       string(body),
	}
}

// methodNotAllowed returns the 405 answer to a method other than POST.
func methodNotAllowed(method string) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(httpapi.Problem{
		Type:   "about:blank",
		Title:  http.StatusText(http.StatusMethodNotAllowed),
		Status: http.StatusMethodNotAllowed,
		Detail: "This resource only accepts POST, not " + method + ".",
	})
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusMethodNotAllowed,
		Headers:    map[string]string{"Content-Type": httpapi.ContentTypeProblem, "Allow": http.MethodPost},
		Body:       string(body),
	}
}

// NewPaymentID returns a new random payment ID: "pay_" and 26 characters
// of base32 (128 bits).
func NewPaymentID() string { return "pay_" + rand.Text() }
