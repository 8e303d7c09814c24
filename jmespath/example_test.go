package jmespath_test

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/jmespath"
)

// An expression written for Powertools runs unchanged: here the order ID in
// the JSON body of an API Gateway request.
func ExampleExpression_SearchValue() {
	expr, err := jmespath.Compile("powertools_json(body).order_id")
	if err != nil {
		panic(err) // at start-up: a bad expression never reaches a request
	}
	req := events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: `{"order_id": "ord_42", "amount": 1999}`}
	id, err := expr.SearchValue(req)
	fmt.Println(id, err)
	// Output: ord_42 <nil>
}

// AppendCanonical gives the bytes a key is hashed from: equal values give
// equal bytes, however the client spelled them.
func ExampleExpression_AppendCanonical() {
	expr := jmespath.MustCompile("powertools_json(body).order")
	for _, body := range []string{
		`{"order": {"id": 7, "lines": [1.0, 2]}}`,
		`{"order": {"lines": [1, 2e0], "id": 7.00}}`,
	} {
		key, err := expr.AppendCanonical(nil, events.APIGatewayProxyRequest{Body: body})
		fmt.Println(string(key), err)
	}
	// Output:
	// {"id":7,"lines":[1,2]} <nil>
	// {"id":7,"lines":[1,2]} <nil>
}

// Envelopes are the expressions Powertools names for common events.
func ExampleExpression_SearchJSON() {
	expr := jmespath.MustCompile(jmespath.EnvelopeSQS)
	body, err := expr.SearchJSON([]byte(`{"Records": [{"messageId": "m1", "body": "{\"order_id\": \"ord_1\"}"}]}`))
	fmt.Println(body, err)
	// Output: [map[order_id:ord_1]] <nil>
}
