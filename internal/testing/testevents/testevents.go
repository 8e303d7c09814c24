// Package testevents builds the Lambda events that this module's
// benchmarks share, so that numbers from different packages describe the
// same input.
package testevents

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// APIGatewayOrder returns an API Gateway REST request of about 1 KB
// (encoded) whose JSON body carries orderID as "order_id": the input of the
// idempotency and JMESPath benchmarks.
func APIGatewayOrder(orderID string) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		Resource:   "/orders",
		Path:       "/orders",
		HTTPMethod: "POST",
		Headers: map[string]string{
			"Accept":            "application/json",
			"Content-Type":      "application/json",
			"Host":              "abc123.execute-api.eu-west-1.amazonaws.com",
			"User-Agent":        "curl/8.5.0",
			"X-Amzn-Trace-Id":   "Root=1-67891233-abcdef012345678912345678",
			"X-Forwarded-For":   "203.0.113.7",
			"X-Forwarded-Port":  "443",
			"X-Forwarded-Proto": "https",
		},
		RequestContext: events.APIGatewayProxyRequestContext{
			AccountID:  "123456789012",
			ResourceID: "abc123",
			Stage:      "prod",
			RequestID:  "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
			Identity:   events.APIGatewayRequestIdentity{SourceIP: "203.0.113.7", UserAgent: "curl/8.5.0"},
			APIID:      "abc123",
			HTTPMethod: "POST",
			Path:       "/prod/orders",
		},
		Body: `{"order_id":"` + orderID + `","customer":"cus_4QFOF3xSVW","amount":4200,"currency":"EUR","lines":[{"sku":"sku_1","qty":2},{"sku":"sku_2","qty":1}]}`,
	}
}

// OrdersResponse returns a JSON list of orders of about n bytes, as an
// API returns it: random order IDs, customers and products from a
// catalog, amounts and times that differ. It compresses as such
// responses do (6.7 times with gzip at 8 KB), not as a run of one byte
// does: the input of the capacity measurements.
func OrdersResponse(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 47))
	if n < 256 {
		// Less than an order: a payment's receipt, padded to n bytes.
		return fmt.Appendf(nil, `{"payment_id":"pay_%016x","status":"created","reference":"%s"}`, r.Uint64(), strings.Repeat("0", max(0, n-71)))
	}
	statuses := []string{"pending", "paid", "shipped", "delivered", "refunded"}
	products := []string{"Espresso cups, set of 4", "Pour-over kettle", "Burr grinder", "Paper filters, 100", "Travel mug", "Milk jug", "Scale with timer", "Cleaning tablets"}
	created := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.WriteString(`{"orders":[`)
	for i := 0; b.Len() < n-2; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		p := r.IntN(len(products))
		created = created.Add(time.Duration(r.IntN(600)) * time.Second)
		fmt.Fprintf(&b, `{"id":"ord_%012x","customer":"cus_%04d","items":[{"sku":"SKU-%03d","name":%q,"quantity":%d,"unit_price":{"amount":%d,"currency":"EUR"}}],"status":%q,"created_at":%q}`,
			r.Uint64()>>16, r.IntN(40), 100+p, products[p], 1+r.IntN(4), 500+p*250, statuses[r.IntN(len(statuses))], created.Format(time.RFC3339))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}
