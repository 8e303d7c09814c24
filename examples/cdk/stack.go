package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/retrysafe/retrysafe/examples/cdk/idempotencytable"
)

// The example programs, by directory name under examples/ in the retrysafe
// module; Code is asked for each of them.
const (
	examplePayments = "payments"
	exampleFunction = "function"
	exampleOrders   = "orders"
)

// examples lists them in the order they are built.
var examples = []string{examplePayments, exampleFunction, exampleOrders}

// featureFlags are the CDK feature flags this app relies on. They are set in
// code because cdk.json is read only by the CDK CLI, not by `go run .` or
// the tests, and the template must not depend on how it was synthesized.
var featureFlags = map[string]any{
	// Fail synthesis when the CDK's built-in CloudFormation validation
	// finds an error (without the flag, it only warns).
	"@aws-cdk/core:validateAgainstDefaultRules": true,
	// Statements that share their actions or resources are merged.
	"@aws-cdk/aws-iam:minimizePolicies": true,
	// Lambda creates each function's log group itself on first use, as with
	// the SAM template; a CDK-managed log group would be an extra resource.
	"@aws-cdk/aws-lambda:useCdkManagedLogGroup": false,
}

// StackProps configures the examples stack.
type StackProps struct {
	awscdk.StackProps

	// Code returns the deployment package of one example program, named by
	// its directory under examples/ ("payments", "function", "orders"): a
	// directory or zip with an executable "bootstrap" for linux/arm64.
	Code func(example string) awslambda.Code
}

// Stack is the CDK counterpart of template.yaml: the same resources, under
// the same construct IDs as the SAM template's logical IDs, with the same
// environment variables and permissions.
type Stack struct {
	// Stack is the CloudFormation stack. It is a field, not embedded: the
	// CDK cannot take back a Go value that embeds one of its objects, so a
	// *Stack could not be the scope of further constructs.
	Stack awscdk.Stack

	// The tables: the idempotency records, and the examples' ledgers.
	IdempotencyTable *idempotencytable.Table
	PaymentsTable    awsdynamodb.Table
	OrdersTable      awsdynamodb.Table

	// The functions, one per example program.
	PaymentsFunction     awslambda.Function
	ConfirmationFunction awslambda.Function
	OrdersFunction       awslambda.Function

	// API serves POST /payments; OrdersQueue feeds OrdersFunction.
	API                   awsapigatewayv2.HttpApi
	OrdersQueue           awssqs.Queue
	OrdersDeadLetterQueue awssqs.Queue
}

// NewStack defines the examples stack in scope.
func NewStack(scope constructs.Construct, id string, props *StackProps) *Stack {
	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("retrysafe examples: idempotent Go Lambda functions (an HTTP payments API, " +
			"an idempotent function inside a handler, and an SQS orders consumer) over " +
			"one DynamoDB idempotency table.")
	}
	s := &Stack{Stack: awscdk.NewStack(scope, jsii.String(id), &sp)}
	stack := s.Stack

	// Every table of the examples goes with the stack, as in the SAM
	// template; a real application keeps the default (RETAIN).
	s.IdempotencyTable = idempotencytable.New(stack, "IdempotencyTable", &idempotencytable.Props{
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	s.PaymentsTable = ledgerTable(stack, "PaymentsTable", "payment_id")
	s.OrdersTable = ledgerTable(stack, "OrdersTable", "processing_id")

	// POST /payments, made idempotent by the Idempotency-Key header.
	s.PaymentsFunction = exampleFunc(stack, "PaymentsFunction", props.Code(examplePayments),
		"POST /payments, made idempotent by the Idempotency-Key header")
	s.IdempotencyTable.GrantReadWriteRecords(s.PaymentsFunction, idempotencytable.DefaultEnvVar)
	grantLedger(s.PaymentsTable, s.PaymentsFunction, "PAYMENTS_TABLE")
	s.API = awsapigatewayv2.NewHttpApi(stack, jsii.String("HttpApi"), nil)
	s.API.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path:    jsii.String("/payments"),
		Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_POST},
		Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(
			jsii.String("CreatePayment"), s.PaymentsFunction, nil),
	})

	// The idempotent function inside a handler.
	s.ConfirmationFunction = exampleFunc(stack, "ConfirmationFunction", props.Code(exampleFunction),
		"Sends an order confirmation at most once per order, inside a handler")
	s.IdempotencyTable.GrantReadWriteRecords(s.ConfirmationFunction, idempotencytable.DefaultEnvVar)

	// The SQS orders consumer.
	s.OrdersDeadLetterQueue = awssqs.NewQueue(stack, jsii.String("OrdersDeadLetterQueue"), &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	s.OrdersQueue = awssqs.NewQueue(stack, jsii.String("OrdersQueue"), &awssqs.QueueProps{
		// At least six times the function timeout, as Lambda advises.
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(60)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: s.OrdersDeadLetterQueue, MaxReceiveCount: jsii.Number(5)},
	})
	s.OrdersFunction = exampleFunc(stack, "OrdersFunction", props.Code(exampleOrders),
		"Processes each order of an SQS batch once, reporting only failed records")
	s.IdempotencyTable.GrantReadWriteRecords(s.OrdersFunction, idempotencytable.DefaultEnvVar)
	grantLedger(s.OrdersTable, s.OrdersFunction, "ORDERS_TABLE")
	s.OrdersFunction.AddEventSource(awslambdaeventsources.NewSqsEventSource(s.OrdersQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	}))

	// The outputs of template.yaml, under the same names.
	output(stack, "PaymentsApi", jsii.String(*s.API.ApiEndpoint()+"/payments"), "The payments endpoint")
	output(stack, "IdempotencyTableName", s.IdempotencyTable.TableName(), "")
	output(stack, "PaymentsTableName", s.PaymentsTable.TableName(), "")
	output(stack, "OrdersTableName", s.OrdersTable.TableName(), "")
	output(stack, "OrdersQueueUrl", s.OrdersQueue.QueueUrl(), "")
	output(stack, "ConfirmationFunctionName", s.ConfirmationFunction.FunctionName(), "")
	return s
}

// ledgerTable defines a table in which every real side effect writes one
// item, so that a duplicate shows as two items.
func ledgerTable(scope constructs.Construct, id, key string) awsdynamodb.Table {
	return awsdynamodb.NewTable(scope, jsii.String(id), &awsdynamodb.TableProps{
		PartitionKey:  &awsdynamodb.Attribute{Name: jsii.String(key), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:   awsdynamodb.BillingMode_PAY_PER_REQUEST,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
}

// grantLedger lets fn write ledger items, and only that, and passes it the
// table name in envVar.
func grantLedger(table awsdynamodb.Table, fn awslambda.Function, envVar string) {
	fn.AddEnvironment(jsii.String(envVar), table.TableName(), nil)
	// Not table.GrantWriteData, which also allows batch writes, updates
	// and deletes: the examples only ever put.
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:PutItem"),
		Resources: jsii.Strings(*table.TableArn()),
	}))
}

// exampleFunc defines a function with the settings of the SAM template's
// Globals.
func exampleFunc(scope constructs.Construct, id string, code awslambda.Code, description string) awslambda.Function {
	return awslambda.NewFunction(scope, jsii.String(id), &awslambda.FunctionProps{
		Code:         code,
		Description:  jsii.String(description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(10)),
		MemorySize:   jsii.Number(256),
	})
}

func output(scope constructs.Construct, id string, value *string, description string) {
	props := &awscdk.CfnOutputProps{Value: value}
	if description != "" {
		props.Description = jsii.String(description)
	}
	awscdk.NewCfnOutput(scope, jsii.String(id), props)
}
