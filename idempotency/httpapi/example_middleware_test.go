package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func ExampleMiddleware() {
	var charges atomic.Int64
	createPayment := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1) // the side effect that must not happen twice
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":%d}`, n)
	})
	// On a server: a DynamoDB or Redis store, shared by its instances.
	idem := idempotency.Must(httpapi.Middleware(memory.New(), idempotency.WithKeyPrefix("payments")))
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem(createPayment))

	post := func(key, body string) {
		req := httptest.NewRequest("POST", "/payments", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Content-Type"), w.Header().Get("Idempotent-Replayed"), w.Body.String())
	}
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"amount":1999}`)
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"amount":1999}`) // a retry
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"amount":2999}`) // the key, for another payment
	post("", `{"amount":1999}`)
	fmt.Println("charges:", charges.Load())
	// Output:
	// 201 application/json  {"payment":1}
	// 201 application/json true {"payment":1}
	// 422 application/problem+json  {"type":"https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#key-reused","title":"Idempotency key reused for a different request","status":422,"detail":"The Idempotency-Key was already used for a request that differs from this one (method, path, query or body). Use a new key for a new request."}
	// 400 application/problem+json  {"type":"https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#missing-key","title":"Idempotency key required","status":400,"detail":"A POST request to this API needs the Idempotency-Key header. Generate a unique key (a UUID) for each operation and send it with every retry of that operation."}
	// charges: 1
}

func ExampleTransport() {
	// A server whose first answer to each request is lost: a 503 here,
	// which the client retries, with the same key.
	var attempts atomic.Int64
	charge := idempotency.Must(httpapi.Middleware(memory.New()))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "charged once")
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		charge.ServeHTTP(w, r)
	}))
	defer srv.Close()

	client := &http.Client{Transport: &httpapi.Transport{}}
	// The key of the operation, kept with it: a retry after a restart
	// sends the same.
	ctx := httpapi.ContextWithKey(context.Background(), "order-1042")
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/payments", strings.NewReader(`{"amount":1999}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "attempts:", httpapi.Attempts(resp), "replayed:", httpapi.Replayed(resp))
	// Output:
	// 200 charged once attempts: 2 replayed: false
}
