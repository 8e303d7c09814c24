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

// Envelopes are the expressions Powertools names for common events.
func ExampleExpression_SearchJSON() {
	expr, err := jmespath.Compile(jmespath.EnvelopeSQS)
	if err != nil {
		panic(err)
	}
	body, err := expr.SearchJSON([]byte(`{"Records": [{"messageId": "m1", "body": "{\"order_id\": \"ord_1\"}"}]}`))
	fmt.Println(body, err)
	// Output: [map[order_id:ord_1]] <nil>
}
