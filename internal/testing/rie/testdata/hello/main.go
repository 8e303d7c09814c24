// Command hello is a bare Lambda function, the baseline against which the
// examples' cold starts are measured.
package main

import "github.com/aws/aws-lambda-go/lambda"

func main() {
	lambda.Start(func() (string, error) { return "hello", nil })
}
