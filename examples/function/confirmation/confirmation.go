// Package confirmation is the core of the function example: a Lambda
// handler that makes one plain function idempotent inside it, the
// counterpart of Powertools' idempotent_function.
//
// The handler receives an order that was placed (from a Step Functions
// task, an EventBridge target or a direct invocation, all of which may
// deliver an event more than once) and sends the customer a confirmation
// email. Sending is the part that must happen once per order, so only
// that function is wrapped: its key is the order ID, selected with the
// JMESPath expression "order_id", and payload validation compares the
// recipient and the amount, so that a second, different order that reuses
// an ID is refused instead of being answered with the first one's
// confirmation.
package confirmation

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// EnvIdempotencyTable names the DynamoDB table of idempotency records; the
// example's main package reads it. The AWS SDK reads its own variables.
const EnvIdempotencyTable = "IDEMPOTENCY_TABLE"

// EnvVars lists the variables the example's main package reads.
var EnvVars = []string{EnvIdempotencyTable}

// The idempotency settings of SendConfirmation.
const (
	// KeyExpression selects the idempotency key from the Order.
	KeyExpression = "order_id"
	// ValidationExpression selects what must not change between deliveries
	// of one order.
	ValidationExpression = "[customer_email, total, currency]"
	// KeyPrefix is the prefix of the idempotency records.
	KeyPrefix = "confirmation"
	// Expiry is how long an order's confirmation is remembered: longer
	// than the sources of the event retry (EventBridge: 24 hours).
	Expiry = 48 * time.Hour
)

// Order is the handler's event: an order that was placed.
type Order struct {
	// OrderID identifies the order: the idempotency key.
	OrderID string `json:"order_id"`
	// CustomerEmail is where the confirmation goes.
	CustomerEmail string `json:"customer_email"`
	// CustomerName greets the customer; optional.
	CustomerName string `json:"customer_name,omitempty"`
	// Items are listed in the email.
	Items []Item `json:"items,omitempty"`
	// Total is in the currency's minor unit (cents).
	Total int64 `json:"total"`
	// Currency is an ISO 4217 code.
	Currency string `json:"currency"`
}

// Item is a line of an Order.
type Item struct {
	// SKU identifies the product.
	SKU string `json:"sku"`
	// Quantity is how many were ordered.
	Quantity int `json:"quantity"`
}

// Email is a message for a Mailer.
type Email struct {
	// To is the recipient's address.
	To string
	// Subject is the subject line.
	Subject string
	// Body is the plain-text body.
	Body string
}

// Mailer sends email and returns the message's ID.
type Mailer interface {
	Send(ctx context.Context, e Email) (messageID string, err error)
}

// Confirmation is the result of sending an order's confirmation: what is
// stored, and returned again for every later delivery of the order.
type Confirmation struct {
	// OrderID is the order confirmed.
	OrderID string `json:"order_id"`
	// MessageID is the Mailer's ID of the email sent.
	MessageID string `json:"message_id"`
	// SentAt is when it was sent.
	SentAt time.Time `json:"sent_at"`
}

// Config holds the handler's dependencies.
type Config struct {
	// Store keeps the idempotency records. Required.
	Store persistence.Store
	// Mailer sends the confirmations. Required.
	Mailer Mailer
	// Logger receives the handler's and the library's logs. Default
	// slog.Default().
	Logger *slog.Logger
}

// Handler handles Order events.
type Handler struct {
	cfg  Config
	send func(context.Context, Order) (Confirmation, error)
}

// New returns the handler. It fails if a dependency is missing.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil || cfg.Mailer == nil {
		return nil, errors.New("confirmation: Config.Store and Config.Mailer are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg}
	send, err := idempotency.Wrap(h.sendConfirmation, cfg.Store,
		idempotency.WithKey(KeyExpression),
		idempotency.WithPayloadValidation(ValidationExpression),
		// An order without an ID must fail, not be sent unprotected.
		idempotency.WithRequireKey(),
		idempotency.WithKeyPrefix(KeyPrefix),
		idempotency.WithExpiry(Expiry),
		idempotency.WithLogger(cfg.Logger),
	)
	if err != nil {
		return nil, err
	}
	h.send = send
	return h, nil
}

// Handle confirms order: it sends the confirmation email once per order
// ID, and returns the confirmation, the same one for every delivery of
// the order.
//
// Besides the order's own validation errors, it returns the library's:
// *idempotency.PayloadMismatchError when the order ID was confirmed for
// another recipient or amount, *idempotency.InProgressError while another
// delivery of the order is being confirmed (retry later), and
// *idempotency.StoreError. Lambda reports their type names as errorType,
// which retry policies (Step Functions Retry, for example) can match.
func (h *Handler) Handle(ctx context.Context, order Order) (Confirmation, error) {
	if err := validate(order); err != nil {
		return Confirmation{}, err
	}
	conf, err := h.send(ctx, order)
	if err != nil {
		return Confirmation{}, err
	}
	h.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "confirmation: order confirmed",
		slog.String("order_id", conf.OrderID), slog.String("message_id", conf.MessageID))
	return conf, nil
}

// InvalidOrderError reports an Order that cannot be confirmed.
type InvalidOrderError struct{ Reason string }

// Error returns the reason, prefixed with the package name.
func (e *InvalidOrderError) Error() string { return "confirmation: invalid order: " + e.Reason }

func validate(o Order) error {
	switch {
	case strings.TrimSpace(o.OrderID) == "":
		return &InvalidOrderError{"order_id is empty"}
	case !strings.Contains(o.CustomerEmail, "@"):
		return &InvalidOrderError{fmt.Sprintf("customer_email %q is not an email address", o.CustomerEmail)}
	case o.Total < 0:
		return &InvalidOrderError{"total is negative"}
	}
	return nil
}

// sendConfirmation is the function made idempotent: it composes the email
// and sends it.
func (h *Handler) sendConfirmation(ctx context.Context, o Order) (Confirmation, error) {
	name := o.CustomerName
	if name == "" {
		name = "customer"
	}
	var items strings.Builder
	for _, it := range o.Items {
		fmt.Fprintf(&items, "  %d × %s\n", it.Quantity, it.SKU)
	}
	id, err := h.cfg.Mailer.Send(ctx, Email{
		To:      o.CustomerEmail,
		Subject: "Your order " + o.OrderID + " is confirmed",
		Body: fmt.Sprintf("Dear %s,\n\nthank you for your order %s:\n%s\nTotal: %s %s\n",
			name, o.OrderID, items.String(), formatMinor(o.Total), o.Currency),
	})
	if err != nil {
		// Nothing was sent: the key is released and the next delivery of
		// the order tries again.
		return Confirmation{}, fmt.Errorf("confirmation: sending the email for order %s: %w", o.OrderID, err)
	}
	return Confirmation{OrderID: o.OrderID, MessageID: id, SentAt: time.Now().UTC()}, nil
}

// formatMinor formats an amount in minor units with two decimals.
func formatMinor(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}

// LogMailer "sends" each email by writing it to a structured log, which
// ends up in CloudWatch Logs: the example deploys without an email
// service. Replace it with a Mailer over Amazon SES (sesv2.SendEmail) in a
// real application.
type LogMailer struct {
	// Logger receives the emails. Required.
	Logger *slog.Logger
}

// Send logs e and returns a new message ID.
func (m LogMailer) Send(ctx context.Context, e Email) (string, error) {
	id := "msg_" + rand.Text()
	m.Logger.LogAttrs(ctx, slog.LevelInfo, "confirmation: email sent",
		slog.String("message_id", id), slog.String("to", e.To), slog.String("subject", e.Subject), slog.String("body", e.Body))
	return id, nil
}
