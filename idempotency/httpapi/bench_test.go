package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// The overhead of the middleware over a bare net/http handler, on a first
// call and on a replay, with the memory store, next to the same for the
// API Gateway HTTP API adapter over a bare Lambda handler. Requests go to
// the handler in the process, to a writer that keeps nothing, so that what
// is measured is the middleware:
//
//	go test -run '^$' -bench 'Middleware|Adapter' -benchmem ./idempotency/httpapi

const (
	benchBody     = `{"amount":1999,"currency":"EUR","customer":"cus_42"}`
	benchResponse = `{"payment_id":"pay_123","amount":1999,"currency":"EUR","customer":"cus_42"}`
)

// nullWriter is a ResponseWriter that keeps only its header map.
type nullWriter struct{ h http.Header }

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nullWriter) WriteHeader(int)             {}

// payments is the bare handler: it reads the request and answers 201.
var payments = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, benchResponse)
})

func BenchmarkMiddleware(b *testing.B) {
	run := func(b *testing.B, h http.Handler, key func(i int) string) {
		req, err := http.NewRequestWithContext(b.Context(), "POST", "http://api.example/payments", nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		w := &nullWriter{h: http.Header{}}
		body := strings.NewReader(benchBody)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			body.Reset(benchBody)
			req.Body, req.ContentLength = io.NopCloser(body), int64(len(benchBody))
			req.Header["Idempotency-Key"] = []string{key(i)}
			clear(w.h)
			h.ServeHTTP(w, req)
		}
	}
	keys := benchKeys()
	b.Run("bare", func(b *testing.B) { run(b, payments, keys) })
	b.Run("first_call", func(b *testing.B) {
		h := idempotency.Must(httpapi.Middleware(memory.New()))(payments)
		run(b, h, keys)
	})
	b.Run("replay", func(b *testing.B) {
		h := idempotency.Must(httpapi.Middleware(memory.New()))(payments)
		run(b, h, func(int) string { return keys(0) })
	})
}

func paymentsV2(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusCreated,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       benchResponse,
	}, nil
}

func BenchmarkAdapterAPIGatewayV2(b *testing.B) {
	run := func(b *testing.B, h httpapi.APIGatewayV2Handler, key func(i int) string) {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/payments", Body: benchBody,
			Headers: map[string]string{"content-type": "application/json"}}
		ev.RequestContext.HTTP.Method = "POST"
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ev.Headers["idempotency-key"] = key(i)
			if _, err := h(b.Context(), ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	keys := benchKeys()
	b.Run("bare", func(b *testing.B) { run(b, paymentsV2, keys) })
	b.Run("first_call", func(b *testing.B) {
		run(b, idempotency.Must(httpapi.WrapAPIGatewayV2(paymentsV2, memory.New())), keys)
	})
	b.Run("replay", func(b *testing.B) {
		run(b, idempotency.Must(httpapi.WrapAPIGatewayV2(paymentsV2, memory.New())), func(int) string { return keys(0) })
	})
}

// benchKeys returns a new key for each i, made before the timer starts
// (a million of them, which first calls take in turns).
func benchKeys() func(i int) string {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "8e03978e-40d5-43e8-bc93-" + strconv.Itoa(100000000000+i)
	}
	return func(i int) string { return keys[i%len(keys)] }
}
