package httpapi_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func ExampleWrapAPIGatewayV2() {
	orders := 0
	createOrder := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		orders++ // the side effect that must not happen twice
		return events.APIGatewayV2HTTPResponse{
			StatusCode: 201,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       fmt.Sprintf(`{"order":%d}`, orders),
		}, nil
	}
	// In a Lambda function: lambda.Start(handler), with a DynamoDB store.
	handler := idempotency.Must(httpapi.WrapAPIGatewayV2(createOrder, memory.New(),
		idempotency.WithKeyPrefix("orders")))

	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/orders",
		Headers: map[string]string{"idempotency-key": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`},
		Body:    `{"item":"book"}`,
	}
	req.RequestContext.HTTP.Method = "POST"

	first, _ := handler(context.Background(), req)
	retry, _ := handler(context.Background(), req)
	fmt.Println(first.StatusCode, first.Body, "replayed:", first.Headers["Idempotent-Replayed"] == "true")
	fmt.Println(retry.StatusCode, retry.Body, "replayed:", retry.Headers["Idempotent-Replayed"] == "true")

	req.Body = `{"item":"pen"}` // the same key for another request
	reused, _ := handler(context.Background(), req)
	fmt.Println(reused.StatusCode, reused.Headers["Content-Type"])
	fmt.Println(reused.Body)
	fmt.Println("orders:", orders)
	// Output:
	// 201 {"order":1} replayed: false
	// 201 {"order":1} replayed: true
	// 422 application/problem+json
	// {"type":"https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#key-reused","title":"Idempotency key reused for a different request","status":422,"detail":"The Idempotency-Key was already used for a request that differs from this one (method, path, query or body). Use a new key for a new request."}
	// orders: 1
}

func ExampleWithScope() {
	createTransfer := func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		user := req.RequestContext.Authorizer["principalId"]
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: fmt.Sprintf("transfer for %v", user)}, nil
	}
	// The principal that the API's authorizer established is part of the
	// key: two users who pick the same key never see each other's results.
	handler := idempotency.Must(httpapi.WrapAPIGateway(createTransfer, memory.New(),
		httpapi.WithScope(httpapi.ScopePrincipal()),
		idempotency.WithKeyPrefix("transfers")))

	as := func(user string) events.APIGatewayProxyRequest {
		req := events.APIGatewayProxyRequest{
			HTTPMethod: "POST",
			Path:       "/transfers",
			Headers:    map[string]string{"Idempotency-Key": "key-1"},
			Body:       `{"amount":100}`,
		}
		req.RequestContext.APIID = "a1b2c3d4e5"
		req.RequestContext.Authorizer = map[string]any{"principalId": user} // a Lambda authorizer's
		return req
	}
	for _, user := range []string{"alice", "bob", "alice"} {
		resp, _ := handler(context.Background(), as(user))
		fmt.Println(resp.StatusCode, resp.Body, "replayed:", resp.Headers["Idempotent-Replayed"] == "true")
	}
	// Output:
	// 201 transfer for alice replayed: false
	// 201 transfer for bob replayed: false
	// 201 transfer for alice replayed: true
}

func ExampleWrapFunctionURL() {
	handler := idempotency.Must(httpapi.WrapFunctionURL(func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: 202, Body: `{"job":"queued"}`}, nil
	}, memory.New()))

	req := events.LambdaFunctionURLRequest{RawPath: "/jobs", Headers: map[string]string{}}
	req.RequestContext.HTTP.Method = "POST"
	for _, key := range []string{"", `"job-1`, "job-1"} {
		if key != "" {
			req.Headers["idempotency-key"] = key
		}
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Body)
	}
	// Output:
	// 400 {"type":"https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#missing-key","title":"Idempotency key required","status":400,"detail":"A POST request to this API needs the Idempotency-Key header. Generate a unique key (a UUID) for each operation and send it with every retry of that operation."}
	// 400 {"type":"https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-key","title":"Invalid idempotency key","status":400,"detail":"The Idempotency-Key header is a quoted string without its closing quote."}
	// 202 {"job":"queued"}
}
