package httpclient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/idempotency/httpclient"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func ExampleTransport() {
	// A payments API behind httpapi.Middleware.
	var charges atomic.Int64
	payments := idempotency.Must(httpapi.Middleware(memory.New()))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "payment %d", charges.Add(1))
	}))
	// A network that loses the first answer: the payment is made, and the
	// client gets a 502 from the proxy in front of the API.
	var mu sync.Mutex
	var keys []string // the key of each attempt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		first := len(keys) == 1
		mu.Unlock()
		if first {
			payments.ServeHTTP(httptest.NewRecorder(), r)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		payments.ServeHTTP(w, r)
	}))
	defer srv.Close()

	client := &http.Client{Transport: &httpclient.Transport{}}
	resp, err := client.Post(srv.URL+"/payments", "application/json", strings.NewReader(`{"amount":1999}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println("attempts:", httpclient.Attempts(resp), "replayed:", httpclient.Replayed(resp))
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("charges:", charges.Load(), "one key:", len(keys) == 2 && keys[0] == keys[1])
	// Output:
	// 201 payment 1
	// attempts: 2 replayed: true
	// charges: 1 one key: true
}

func ExampleWithKey() {
	var charges atomic.Int64
	srv := httptest.NewServer(idempotency.Must(httpapi.Middleware(memory.New()))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "payment %d for key %s", charges.Add(1), r.Header.Get("Idempotency-Key"))
	})))
	defer srv.Close()

	// The key of an order, kept with it (in its database row, say): a
	// process that restarts and sends the order again sends the same key,
	// and gets the first answer.
	ctx := httpclient.WithKey(context.Background(), "order-1042")
	for range 2 {
		client := &http.Client{Transport: &httpclient.Transport{}}
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/payments", strings.NewReader(`{"amount":1999}`))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", httpclient.Replayed(resp))
	}
	fmt.Println("charges:", charges.Load())
	// Output:
	// 201 payment 1 for key "order-1042" replayed: false
	// 201 payment 1 for key "order-1042" replayed: true
	// charges: 1
}
