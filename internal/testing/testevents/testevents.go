// Package testevents builds the Lambda events that this module's
// benchmarks share, so that numbers from different packages describe the
// same input.
package testevents

import "github.com/aws/aws-lambda-go/events"

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
