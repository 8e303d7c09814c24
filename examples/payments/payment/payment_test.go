package payment_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/examples/payments/payment/paymenttest"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

type fixture struct {
	ledger  *paymenttest.Ledger
	handler httpapi.APIGatewayV2Handler
	start   time.Time
}

// newFixture returns the handler over the memory store, with payment IDs
// pay_1, pay_2... and the clock of the test (synctest's inside a bubble).
func newFixture(t *testing.T, demoDelay bool) *fixture {
	t.Helper()
	f := &fixture{ledger: &paymenttest.Ledger{}, start: time.Now()}
	h, err := payment.New(payment.Config{
		Store:     memory.New(),
		Ledger:    f.ledger,
		NewID:     paymenttest.IDs(),
		DemoDelay: demoDelay,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	f.handler = h
	return f
}

const body = `{"amount":1999,"currency":"EUR","customer":"cus_42"}`

func post(key, body string, headers ...string) events.APIGatewayV2HTTPRequest {
	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/payments",
		Headers: map[string]string{"content-type": "application/json"},
		Body:    body,
	}
	req.RequestContext.HTTP.Method = "POST"
	req.RequestContext.HTTP.Path = "/payments"
	if key != "" {
		req.Headers["idempotency-key"] = key
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Headers[headers[i]] = headers[i+1]
	}
	return req
}

func (f *fixture) send(t *testing.T, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	return f.sendContext(t, t.Context(), req)
}

func (f *fixture) sendContext(t *testing.T, ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := f.handler(ctx, req)
	require.NoError(t, err, "the handler answers every request with a response")
	return resp
}

func problemOf(t *testing.T, resp events.APIGatewayV2HTTPResponse) httpapi.Problem {
	t.Helper()
	require.Equal(t, httpapi.ContentTypeProblem, resp.Headers["Content-Type"], resp.Body)
	var p httpapi.Problem
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &p))
	require.Equal(t, resp.StatusCode, p.Status)
	return p
}

func TestCreateAndReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, false)
		first := f.send(t, post("k1", body))
		require.Equal(t, http.StatusCreated, first.StatusCode, first.Body)
		assert.Equal(t, `{"payment_id":"pay_1","amount":1999,"currency":"EUR","customer":"cus_42"}`, first.Body)
		assert.Equal(t, map[string]string{"Content-Type": "application/json"}, first.Headers, "no Idempotent-Replayed on the first response")

		require.Len(t, f.ledger.Charges(), 1)
		c := f.ledger.Charges()[0]
		assert.Equal(t, payment.Payment{PaymentID: "pay_1", Amount: 1999, Currency: "EUR", Customer: "cus_42"}, c.Payment)
		assert.True(t, strings.HasPrefix(c.IdempotencyKey, payment.KeyPrefix+"#"), c.IdempotencyKey)
		assert.Equal(t, f.start, c.CreatedAt)

		for range 3 {
			again := f.send(t, post(`"k1"`, body)) // the quoted form is the same key
			assert.Equal(t, http.StatusCreated, again.StatusCode)
			assert.Equal(t, first.Body, again.Body)
			assert.Equal(t, "true", again.Headers[httpapi.HeaderReplayed])
		}
		assert.Equal(t, 1, len(f.ledger.Charges()))

		other := f.send(t, post("k2", body))
		assert.Equal(t, http.StatusCreated, other.StatusCode)
		assert.Contains(t, other.Body, `"payment_id":"pay_2"`, "another key is another payment")
		assert.Equal(t, 2, len(f.ledger.Charges()))
	})
}

// Keys are remembered for 24 hours.
func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, false)
		f.send(t, post("k1", body))
		time.Sleep(payment.Expiry - time.Minute)
		assert.Equal(t, "true", f.send(t, post("k1", body)).Headers[httpapi.HeaderReplayed])
		time.Sleep(2 * time.Minute)
		resp := f.send(t, post("k1", body))
		assert.Empty(t, resp.Headers[httpapi.HeaderReplayed], "expired: the request runs again")
		assert.Equal(t, 2, len(f.ledger.Charges()))
	})
}

func TestSameKeyOtherRequest(t *testing.T) {
	f := newFixture(t, false)
	f.send(t, post("k1", body))
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"amount":   post("k1", `{"amount":2999,"currency":"EUR","customer":"cus_42"}`),
		"customer": post("k1", `{"amount":1999,"currency":"EUR","customer":"cus_43"}`),
		// The fingerprint is the body as sent: the same payment spelled
		// differently is another request.
		"member order": post("k1", `{"currency":"EUR","amount":1999,"customer":"cus_42"}`),
	} {
		t.Run(name, func(t *testing.T) {
			resp := f.send(t, req)
			assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
			assert.Equal(t, httpapi.ProblemKeyReused, problemOf(t, resp).Type)
		})
	}
	assert.Equal(t, 1, len(f.ledger.Charges()))
}

func TestMissingKey(t *testing.T) {
	f := newFixture(t, false)
	resp := f.send(t, post("", body))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, httpapi.ProblemMissingKey, problemOf(t, resp).Type)
	assert.Zero(t, len(f.ledger.Charges()))
}

// Invalid bodies are answered before the key is looked at: they consume
// nothing, and the corrected body goes through with the same key.
func TestInvalidBodies(t *testing.T) {
	for name, tc := range map[string]struct{ body, detail string }{
		"empty":           {``, "the body is empty"},
		"not JSON":        {`amount=5`, "invalid character 'a' looking for beginning of value"},
		"array":           {`[1]`, "the body must be a JSON object"},
		"null":            {`null`, "amount must be a positive integer"},
		"unknown member":  {`{"amount":1,"currency":"EUR","customer":"c","tip":5}`, `unknown field "tip"`},
		"two values":      {`{"amount":1,"currency":"EUR","customer":"c"} {}`, "the body has more than one JSON value"},
		"zero amount":     {`{"amount":0,"currency":"EUR","customer":"c"}`, "amount must be a positive integer (in the currency's minor unit)"},
		"negative amount": {`{"amount":-5,"currency":"EUR","customer":"c"}`, "amount must be a positive integer"},
		"decimal amount":  {`{"amount":19.99,"currency":"EUR","customer":"c"}`, "amount must be an integer"},
		"string amount":   {`{"amount":"1999","currency":"EUR","customer":"c"}`, "amount must be an integer"},
		"huge amount":     {`{"amount":1e30,"currency":"EUR","customer":"c"}`, "amount must be an integer"},
		"lower currency":  {`{"amount":1,"currency":"eur","customer":"c"}`, "currency must be an ISO 4217 code of three upper-case letters"},
		"long currency":   {`{"amount":1,"currency":"EURO","customer":"c"}`, "currency must be an ISO 4217 code"},
		"number currency": {`{"amount":1,"currency":978,"customer":"c"}`, "currency must be a string"},
		"no customer":     {`{"amount":1,"currency":"EUR"}`, "customer must be a non-empty string of at most 255 bytes"},
		"blank customer":  {`{"amount":1,"currency":"EUR","customer":"  "}`, "customer must be a non-empty string"},
		"long customer":   {`{"amount":1,"currency":"EUR","customer":"` + strings.Repeat("c", 256) + `"}`, "customer must be a non-empty string of at most 255 bytes"},
		"several":         {`{"amount":0,"currency":"","customer":""}`, "amount must be a positive integer (in the currency's minor unit); currency must be"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, false)
			for range 2 {
				resp := f.send(t, post("k1", tc.body))
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
				p := problemOf(t, resp)
				assert.Equal(t, payment.ProblemInvalidPayment, p.Type)
				assert.Equal(t, "Invalid payment request", p.Title)
				assert.Contains(t, p.Detail, tc.detail)
				assert.Empty(t, resp.Headers[httpapi.HeaderReplayed], "answered, never stored")
			}
			assert.Zero(t, len(f.ledger.Charges()))

			fixed := f.send(t, post("k1", body))
			assert.Equal(t, http.StatusCreated, fixed.StatusCode, "the key was not consumed")
			assert.Empty(t, fixed.Headers[httpapi.HeaderReplayed])
			assert.Equal(t, 1, len(f.ledger.Charges()))

			again := f.send(t, post("k1", tc.body))
			assert.Equal(t, http.StatusBadRequest, again.StatusCode, "still validated first, not a key reuse")
		})
	}
}

func TestInvalidBodyWithoutKey(t *testing.T) {
	f := newFixture(t, false)
	resp := f.send(t, post("", `{}`))
	assert.Equal(t, payment.ProblemInvalidPayment, problemOf(t, resp).Type, "the body is checked first")
}

func TestBase64Body(t *testing.T) {
	f := newFixture(t, false)
	req := post("k1", base64.StdEncoding.EncodeToString([]byte(body)))
	req.IsBase64Encoded = true
	first := f.send(t, req)
	require.Equal(t, http.StatusCreated, first.StatusCode, first.Body)

	replay := f.send(t, post("k1", body))
	assert.Equal(t, "true", replay.Headers[httpapi.HeaderReplayed], "the same body, whether API Gateway encoded it or not")
	assert.Equal(t, first.Body, replay.Body)

	bad := post("k2", "not base64!")
	bad.IsBase64Encoded = true
	resp := f.send(t, bad)
	assert.Equal(t, payment.ProblemInvalidPayment, problemOf(t, resp).Type)
	assert.Equal(t, 1, len(f.ledger.Charges()))
}

func TestOnlyPost(t *testing.T) {
	f := newFixture(t, false)
	for _, method := range []string{"GET", "PUT", "PATCH", "DELETE"} {
		req := post("k1", body)
		req.RequestContext.HTTP.Method = method
		resp := f.send(t, req)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, "POST", resp.Headers["Allow"])
	}
	assert.Zero(t, len(f.ledger.Charges()))
}

// Duplicates that arrive together charge once: each gets the payment, or
// 409 while the first is in progress.
func TestConcurrentDuplicates(t *testing.T) {
	f := newFixture(t, false)
	var wg sync.WaitGroup
	responses := make([]events.APIGatewayV2HTTPResponse, 32)
	for i := range responses {
		wg.Go(func() { responses[i] = f.send(t, post("k1", body)) })
	}
	wg.Wait()
	assert.Equal(t, 1, len(f.ledger.Charges()))
	for _, resp := range responses {
		switch resp.StatusCode {
		case http.StatusCreated:
			assert.Contains(t, resp.Body, `"payment_id":"pay_1"`)
		case http.StatusConflict:
			assert.Equal(t, httpapi.ProblemKeyInUse, problemOf(t, resp).Type)
		default:
			t.Errorf("status %d: %s", resp.StatusCode, resp.Body)
		}
	}
}

// A failed ledger write may have been applied: the failure is recorded,
// and retries never charge again.
func TestLedgerFailure(t *testing.T) {
	f := newFixture(t, false)
	f.ledger.Fail(errors.New("RequestTimeout"))
	resp := f.send(t, post("k1", body))
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, httpapi.ProblemHandlerFailed, problemOf(t, resp).Type)

	f.ledger.Fail(nil)
	for range 2 {
		retry := f.send(t, post("k1", body))
		assert.Equal(t, http.StatusInternalServerError, retry.StatusCode)
		assert.Equal(t, httpapi.ProblemRecordedError, problemOf(t, retry).Type)
	}
	assert.Equal(t, 1, f.ledger.Calls(), "no second attempt to charge")
	assert.Equal(t, http.StatusCreated, f.send(t, post("k2", body)).StatusCode, "a new key charges")
}

// In steps, a ledger failure releases the key, and the retry resumes
// after the stored charge: the payment ID is the first attempt's.
func TestStepsResumeAfterALedgerFailure(t *testing.T) {
	ledger := &paymenttest.Ledger{}
	h, err := payment.New(payment.Config{
		Store: memory.New(), Ledger: ledger, NewID: paymenttest.IDs(), Steps: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	f := &fixture{ledger: ledger, handler: h}
	ledger.Fail(errors.New("RequestTimeout"))
	resp := f.send(t, post("k1", body))
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, httpapi.ProblemHandlerFailed, problemOf(t, resp).Type)

	ledger.Fail(nil)
	retry := f.send(t, post("k1", body))
	require.Equal(t, http.StatusCreated, retry.StatusCode, retry.Body)
	var p payment.Payment
	require.NoError(t, json.Unmarshal([]byte(retry.Body), &p))
	assert.Equal(t, "pay_1", p.PaymentID, "the charge of the first attempt")
	require.Len(t, ledger.Charges(), 1)
	assert.Equal(t, "pay_1", ledger.Charges()[0].PaymentID)
	assert.Equal(t, 2, ledger.Calls(), "the ledger step ran again; the charge did not")
}

func TestDemoDelay(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, false)
			f.send(t, post("k1", body, payment.HeaderDemoDelay, "5s"))
			assert.Equal(t, f.start, f.ledger.Charges()[0].CreatedAt, "the header is ignored")
		})
	})
	t.Run("on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, true)
			f.send(t, post("k1", body, strings.ToLower(payment.HeaderDemoDelay), "5s"))
			assert.Equal(t, f.start.Add(5*time.Second), f.ledger.Charges()[0].CreatedAt, "charged after the delay")
			f.send(t, post("k2", body, payment.HeaderDemoDelay, "not a duration"))
			assert.Equal(t, f.start.Add(5*time.Second), f.ledger.Charges()[1].CreatedAt, "a bad value is ignored")
		})
	})
	// An invocation whose deadline comes before the end of the delay,
	// and that is not killed (no runtime here), waits the delay out as
	// work that does not watch its context, then charges nothing and
	// releases the key: the retry charges once.
	t.Run("past the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, true)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			resp := f.sendContext(t, ctx, post("k1", body, payment.HeaderDemoDelay, "5s"))
			assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
			assert.Zero(t, len(f.ledger.Charges()))
			assert.Equal(t, f.start.Add(5*time.Second), time.Now(), "the delay ignores the deadline")

			retry := f.send(t, post("k1", body))
			assert.Equal(t, http.StatusCreated, retry.StatusCode)
			assert.Equal(t, 1, len(f.ledger.Charges()))
		})
	})
}

func TestNewErrors(t *testing.T) {
	_, err := payment.New(payment.Config{Ledger: &paymenttest.Ledger{}})
	assert.Error(t, err)
	_, err = payment.New(payment.Config{Store: memory.New()})
	assert.Error(t, err)
	_, err = payment.New(payment.Config{Store: memory.New(), Ledger: &paymenttest.Ledger{}, Options: []idempotency.HandlerOption{httpapi.WithHeader("bad header")}})
	assert.Error(t, err, "adapter options are checked")
	_, err = payment.New(payment.Config{Store: memory.New(), Ledger: &paymenttest.Ledger{}, Steps: true, Transactions: true})
	assert.ErrorContains(t, err, "exclude each other")
}

func TestNewPaymentID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := payment.NewPaymentID()
		require.Regexp(t, `^pay_[A-Z2-7]{26}$`, id)
		require.False(t, seen[id])
		seen[id] = true
	}
}

// The sample event of the README (sam local invoke, the emulator) is a
// valid request.
func TestSampleEvent(t *testing.T) {
	data, err := os.ReadFile("../events/post-payment.json")
	require.NoError(t, err)
	var req events.APIGatewayV2HTTPRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&req))
	f := newFixture(t, false)
	first := f.send(t, req)
	assert.Equal(t, http.StatusCreated, first.StatusCode, first.Body)
	assert.Equal(t, "true", f.send(t, req).Headers[httpapi.HeaderReplayed])
}

// Transactions need a store that commits staged writes: the memory store
// does not, and New says so, before any request.
func TestTransactionsNeedACommittingStore(t *testing.T) {
	_, err := payment.New(payment.Config{
		Store:        memory.New(),
		Ledger:       &payment.DynamoDBLedger{Table: "payments", Staged: true},
		Transactions: true,
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "commit")
}
