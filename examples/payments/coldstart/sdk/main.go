// Command sdk is a Lambda function without the library: the handler of
// package coldstart, and the DynamoDB client a function builds at init.
// Its init is the baseline of the wrapped function's.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retrysafe/retrysafe/examples/payments/coldstart"
)

func main() {
	_ = coldstart.Client()
	lambda.Start(coldstart.Handler)
}
