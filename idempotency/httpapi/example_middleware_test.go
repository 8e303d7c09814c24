package httpapi_test

import (
	"fmt"
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
