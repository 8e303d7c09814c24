// Command client makes payments through the payments API of the
// httpserver example (or of the payments example, behind API Gateway)
// with httpclient.Transport: each payment gets an Idempotency-Key, and is
// sent again with it when the network loses the answer or the server says
// to come back, so that it is charged once.
//
//	go run ./httpserver/client -url http://127.0.0.1:8080 -n 3 -repeat 2
//
// prints one line per request: the key, the status, the payment ID (or
// the problem type), whether the answer was a replay, and how many
// attempts it took. -repeat sends each payment again, with its key, as a
// client that did not get the first answer would: the repeats get the
// first answer, replayed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/idempotency/httpclient"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, nil); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "client:", err)
		}
		os.Exit(2)
	}
}

// run makes the payments that args ask for through base (default
// http.DefaultTransport), and prints what it got to out.
func run(ctx context.Context, args []string, out io.Writer, base http.RoundTripper) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "the API's base URL")
	n := fs.Int("n", 1, "how many payments to make, each with a key of its own")
	repeat := fs.Int("repeat", 1, "how many times to send each payment, with its key")
	key := fs.String("key", "", "the Idempotency-Key of the payment, with -n 1 (default: a new UUID)")
	amount := fs.Int64("amount", 1999, "the amount, in the currency's minor unit")
	currency := fs.String("currency", "EUR", "the currency, an ISO 4217 code")
	customer := fs.String("customer", "cus_42", "the customer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key != "" && *n != 1 {
		return errors.New("-key names the key of one payment: give -n 1")
	}
	body, err := json.Marshal(payment.Request{Amount: *amount, Currency: *currency, Customer: *customer})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &httpclient.Transport{Base: base}, Timeout: 2 * time.Minute}
	for range *n {
		k := *key
		if k == "" {
			k = httpclient.NewKey()
		}
		for range *repeat {
			line, err := pay(httpclient.WithKey(ctx, k), client, strings.TrimSuffix(*url, "/")+"/payments", body)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, k, line)
		}
	}
	return nil
}

// pay sends one payment and describes the answer.
func pay(ctx context.Context, client *http.Client, url string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var answer struct {
		payment.Payment
		httpapi.Problem
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return "", fmt.Errorf("%s: %d with a body that is not JSON: %w", url, resp.StatusCode, err)
	}
	what := answer.PaymentID
	if what == "" {
		what = answer.Type
	}
	return fmt.Sprintf("%d %s replayed=%t attempts=%d", resp.StatusCode, what, httpclient.Replayed(resp), httpclient.Attempts(resp)), nil
}
