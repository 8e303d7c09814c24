package idempotencytable_test

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/retrysafe/retrysafe/examples/cdk/idempotencytable"
)

// An idempotency table in an existing stack, and a function that may use
// it: the function gets exactly the store's four actions on the table, and
// the table name in IDEMPOTENCY_TABLE, which it passes to
// persistence/dynamodb.New.
func Example() {
	out, _ := os.MkdirTemp("", "cdk.out")
	defer os.RemoveAll(out)
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	stack := awscdk.NewStack(app, jsii.String("Orders"), nil)

	records := idempotencytable.New(stack, "IdempotencyTable", nil)
	fn := awslambda.NewFunction(stack, jsii.String("Handler"), &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code: awslambda.Code_FromBucket(
			awss3.Bucket_FromBucketName(stack, jsii.String("Artifacts"), jsii.String("my-artifacts")),
			jsii.String("orders/bootstrap.zip"), nil),
	})
	records.GrantReadWriteRecords(fn, idempotencytable.DefaultEnvVar)

	template := app.Synth(nil).GetStackByName(stack.StackName()).Template().(map[string]any)
	for _, r := range template["Resources"].(map[string]any) {
		r := r.(map[string]any)
		props := r["Properties"].(map[string]any)
		switch r["Type"] {
		case "AWS::DynamoDB::Table":
			fmt.Println("key schema:", props["KeySchema"])
			fmt.Println("time to live:", props["TimeToLiveSpecification"])
		case "AWS::Lambda::Function":
			for name := range props["Environment"].(map[string]any)["Variables"].(map[string]any) {
				fmt.Println("environment:", name)
			}
		case "AWS::IAM::Policy":
			for _, s := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				fmt.Println("allowed:", s.(map[string]any)["Action"])
			}
		}
	}
	// Unordered output:
	// key schema: [map[AttributeName:id KeyType:HASH]]
	// time to live: map[AttributeName:expiration Enabled:true]
	// environment: IDEMPOTENCY_TABLE
	// allowed: [dynamodb:PutItem dynamodb:GetItem dynamodb:UpdateItem dynamodb:DeleteItem]
}
