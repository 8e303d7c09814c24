package confirmation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/function/confirmation"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// mailer records what it sends, and can be made to fail or to block.
type mailer struct {
	mu    sync.Mutex
	sent  []confirmation.Email
	fail  error
	block chan struct{}
}

func (m *mailer) Send(ctx context.Context, e confirmation.Email) (string, error) {
	if m.block != nil {
		<-m.block
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return "", m.fail
	}
	m.sent = append(m.sent, e)
	return fmt.Sprintf("msg_%d", len(m.sent)), nil
}

func (m *mailer) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

func newHandler(t *testing.T, m *mailer) *confirmation.Handler {
	t.Helper()
	h, err := confirmation.New(confirmation.Config{
		Store:  memory.New(),
		Mailer: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	return h
}

var order = confirmation.Order{
	OrderID:       "ord_1001",
	CustomerEmail: "ada@example.com",
	CustomerName:  "Ada",
	Items:         []confirmation.Item{{SKU: "book-42", Quantity: 2}},
	Total:         4200,
	Currency:      "EUR",
}

func TestSendsOncePerOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &mailer{}
		h := newHandler(t, m)
		first, err := h.Handle(t.Context(), order)
		require.NoError(t, err)
		assert.Equal(t, confirmation.Confirmation{OrderID: "ord_1001", MessageID: "msg_1", SentAt: time.Now().UTC()}, first)
		require.Len(t, m.sent, 1)
		assert.Equal(t, confirmation.Email{
			To:      "ada@example.com",
			Subject: "Your order ord_1001 is confirmed",
			Body:    "Dear Ada,\n\nthank you for your order ord_1001:\n  2 × book-42\n\nTotal: 42.00 EUR\n",
		}, m.sent[0])

		time.Sleep(time.Hour)
		again, err := h.Handle(t.Context(), order)
		require.NoError(t, err)
		assert.Equal(t, first, again, "the stored confirmation, sent an hour ago")

		// Only the key and the validated members matter: the same order
		// with its items listed differently is the same order.
		reordered := order
		reordered.Items = nil
		again, err = h.Handle(t.Context(), reordered)
		require.NoError(t, err)
		assert.Equal(t, first, again)
		assert.Equal(t, 1, m.count())

		other := order
		other.OrderID = "ord_1002"
		conf, err := h.Handle(t.Context(), other)
		require.NoError(t, err)
		assert.Equal(t, "msg_2", conf.MessageID)

		time.Sleep(confirmation.Expiry)
		conf, err = h.Handle(t.Context(), order)
		require.NoError(t, err)
		assert.Equal(t, "msg_3", conf.MessageID, "after the expiry the order is confirmed again")
	})
}

// An order ID reused for another recipient or amount is refused.
func TestPayloadValidation(t *testing.T) {
	m := &mailer{}
	h := newHandler(t, m)
	_, err := h.Handle(t.Context(), order)
	require.NoError(t, err)
	for name, change := range map[string]func(*confirmation.Order){
		"email":    func(o *confirmation.Order) { o.CustomerEmail = "eve@example.com" },
		"total":    func(o *confirmation.Order) { o.Total = 1 },
		"currency": func(o *confirmation.Order) { o.Currency = "USD" },
	} {
		t.Run(name, func(t *testing.T) {
			o := order
			change(&o)
			_, err := h.Handle(t.Context(), o)
			var mismatch *idempotency.PayloadMismatchError
			assert.ErrorAs(t, err, &mismatch)
		})
	}
	assert.Equal(t, 1, m.count())
}

func TestInvalidOrders(t *testing.T) {
	m := &mailer{}
	h := newHandler(t, m)
	for name, change := range map[string]func(*confirmation.Order){
		"no ID":          func(o *confirmation.Order) { o.OrderID = "" },
		"blank ID":       func(o *confirmation.Order) { o.OrderID = "  " },
		"no email":       func(o *confirmation.Order) { o.CustomerEmail = "" },
		"negative total": func(o *confirmation.Order) { o.Total = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			o := order
			change(&o)
			_, err := h.Handle(t.Context(), o)
			var invalid *confirmation.InvalidOrderError
			assert.ErrorAs(t, err, &invalid)
		})
	}
	assert.Zero(t, m.count())
}

// A failed send releases the key: the next delivery sends.
func TestSendFailure(t *testing.T) {
	boom := errors.New("throttled")
	m := &mailer{fail: boom}
	h := newHandler(t, m)
	_, err := h.Handle(t.Context(), order)
	assert.ErrorIs(t, err, boom)
	m.fail = nil
	conf, err := h.Handle(t.Context(), order)
	require.NoError(t, err)
	assert.Equal(t, "msg_1", conf.MessageID)
}

// Deliveries of one order that arrive together send once: while the
// first one sends, the others see the confirmation in progress.
func TestConcurrentDeliveries(t *testing.T) {
	m := &mailer{block: make(chan struct{})}
	h := newHandler(t, m)
	type result struct {
		conf confirmation.Confirmation
		err  error
	}
	results := make(chan result, 9)
	for range 9 {
		go func() {
			conf, err := h.Handle(t.Context(), order)
			results <- result{conf, err}
		}()
	}
	// One delivery is blocked in the mailer; the eight others return.
	for range 8 {
		r := <-results
		var busy *idempotency.InProgressError
		require.ErrorAs(t, r.err, &busy)
	}
	close(m.block)
	r := <-results
	require.NoError(t, r.err)
	assert.Equal(t, "msg_1", r.conf.MessageID)
	assert.Equal(t, 1, m.count())
}

func TestLogMailer(t *testing.T) {
	var buf bytes.Buffer
	m := confirmation.LogMailer{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	id, err := m.Send(t.Context(), confirmation.Email{To: "ada@example.com", Subject: "s", Body: "b"})
	require.NoError(t, err)
	assert.Regexp(t, `^msg_[A-Z2-7]{26}$`, id)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	assert.Equal(t, "confirmation: email sent", line["msg"])
	assert.Equal(t, id, line["message_id"])
	assert.Equal(t, "ada@example.com", line["to"])
}

func TestNewErrors(t *testing.T) {
	_, err := confirmation.New(confirmation.Config{Mailer: &mailer{}})
	assert.Error(t, err)
	_, err = confirmation.New(confirmation.Config{Store: memory.New()})
	assert.Error(t, err)
}

// The sample event of the README is a valid order.
func TestSampleEvent(t *testing.T) {
	data, err := os.ReadFile("../events/order-placed.json")
	require.NoError(t, err)
	var o confirmation.Order
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&o))
	assert.Equal(t, order, o)
	_, err = newHandler(t, &mailer{}).Handle(t.Context(), o)
	assert.NoError(t, err)
}
