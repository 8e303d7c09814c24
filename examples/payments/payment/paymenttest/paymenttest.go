// Package paymenttest is what the tests of the payments examples share,
// the Lambda function's (examples/payments) and the net/http server's
// (examples/httpserver): a ledger in memory, payment IDs that count, and
// requests over HTTP.
package paymenttest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
)

// Ledger is a payment.Ledger in memory that can be made to fail. Like
// DynamoDB's client, it fails a charge whose context has ended.
type Ledger struct {
	mu      sync.Mutex
	charges []payment.Charge
	calls   int
	fail    error
}

var _ payment.Ledger = (*Ledger)(nil)

// Record records c, or fails with the error of Fail, or the context's.
func (l *Ledger) Record(ctx context.Context, c payment.Charge) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.fail != nil {
		return l.fail
	}
	l.charges = append(l.charges, c)
	return nil
}

// Fail makes every Record from now on fail with err; nil ends it.
func (l *Ledger) Fail(err error) {
	l.mu.Lock()
	l.fail = err
	l.mu.Unlock()
}

// Charges returns the charges recorded so far.
func (l *Ledger) Charges() []payment.Charge {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]payment.Charge(nil), l.charges...)
}

// Calls returns how many times Record was called, failed calls included.
func (l *Ledger) Calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// IDs returns a payment ID generator that counts: pay_1, pay_2, ...
func IDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return "pay_" + strconv.Itoa(n)
	}
}

// Answer is a response as an HTTP client read it.
type Answer struct {
	Status int
	Header http.Header
	Body   string
}

// Problem decodes the answer's problem details, checking its media type.
func (a Answer) Problem(t testing.TB) httpapi.Problem {
	t.Helper()
	require.Equal(t, httpapi.ContentTypeProblem, a.Header.Get("Content-Type"), a.Body)
	var p httpapi.Problem
	require.NoError(t, json.Unmarshal([]byte(a.Body), &p))
	return p
}

// Replayed reports whether the answer was a replay.
func (a Answer) Replayed() bool { return a.Header.Get(httpapi.HeaderReplayed) == "true" }

// Send sends a request with a JSON body, and key as its Idempotency-Key
// unless it is empty, and reads the answer.
func Send(t testing.TB, method, url, key, body string) Answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return Answer{resp.StatusCode, resp.Header, string(data)}
}
