package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scratch holds the stub assets and the cloud assembly of the tests.
var scratch string

func TestMain(m *testing.M) {
	var err error
	if scratch, err = os.MkdirTemp("", "cdk-test"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	jsii.Close() // stops the Node.js child process
	os.RemoveAll(scratch)
	os.Exit(code)
}

// synthesized is the examples stack, synthesized once for all tests.
type synthesized struct {
	stack *Stack
	tmpl  assertions.Template
	json  map[string]any
	// assetCode maps each function's S3 key to the example whose stub it
	// packages, read back from the cloud assembly.
	assetCode map[string]string
}

var (
	synthOnce   sync.Once
	synthResult *synthesized
	synthErr    error
)

func synth(t *testing.T) *synthesized {
	t.Helper()
	synthOnce.Do(func() { synthResult, synthErr = synthesize(filepath.Join(scratch, "examples")) })
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthResult
}

// synthesize builds the stack as main does, with the same feature flags,
// but with a stub deployment package per example (a bootstrap that names
// it), and with path metadata, which the CDK CLI turns on and the drift
// test reads names from.
func synthesize(dir string) (s *synthesized, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("synthesis: %v", r)
		}
	}()
	stubs := map[string]string{}
	for _, name := range examples {
		stubs[name] = filepath.Join(dir, "stub", name)
		if err := os.MkdirAll(stubs[name], 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(stubs[name], "bootstrap"), []byte(stubScript(name)), 0o755); err != nil {
			return nil, err
		}
	}
	outdir := filepath.Join(dir, "cdk.out")
	app := newApp(&awscdk.AppProps{
		Outdir:      jsii.String(outdir),
		StackTraces: jsii.Bool(false),
		Context:     &map[string]any{"aws:cdk:enable-path-metadata": true},
	})
	stack := NewStack(app, stackName, &StackProps{Code: func(example string) awslambda.Code {
		return awslambda.Code_FromAsset(jsii.String(stubs[example]), nil)
	}})
	tmpl := assertions.Template_FromStack(stack.Stack, nil)

	assetCode := map[string]string{}
	staged, err := filepath.Glob(filepath.Join(outdir, "asset.*", "bootstrap"))
	if err != nil {
		return nil, err
	}
	for _, p := range staged {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for _, name := range examples {
			if string(b) == stubScript(name) {
				assetCode[strings.TrimPrefix(filepath.Base(filepath.Dir(p)), "asset.")+".zip"] = name
			}
		}
	}
	return &synthesized{stack: stack, tmpl: tmpl, json: *tmpl.ToJSON(), assetCode: assetCode}, nil
}

func stubScript(example string) string { return "#!/bin/sh\n# stub of examples/" + example + "\n" }

// reporter is the part of testing.T that check needs.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// check runs one of the CDK's assertions, which panic on a mismatch, and
// reports the panic as a failure of t instead.
func check(t reporter, what string, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assertion()
}

type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckReportsMismatch(t *testing.T) {
	s := synth(t)
	var r recorder
	check(&r, "runtime", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"Runtime": "go1.x"})
	})
	require.Len(t, r.errs, 1)
	assert.Contains(t, r.errs[0], "runtime: ")
	assert.Contains(t, r.errs[0], "provided.al2023") // the CDK's report of what it found

	r = recorder{}
	check(&r, "runtime", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"Runtime": "provided.al2023"})
	})
	assert.Empty(t, r.errs)
}

func TestTables(t *testing.T) {
	s := synth(t)
	check(t, "three tables", func() { s.tmpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(3)) })
	table := func(key string, ttl bool) map[string]any {
		props := map[string]any{
			"KeySchema":            []any{map[string]any{"AttributeName": key, "KeyType": "HASH"}},
			"AttributeDefinitions": []any{map[string]any{"AttributeName": key, "AttributeType": "S"}},
			"BillingMode":          "PAY_PER_REQUEST",
		}
		if ttl {
			props["TimeToLiveSpecification"] = map[string]any{"AttributeName": "expiration", "Enabled": true}
		}
		return map[string]any{"Properties": assertions.Match_ObjectEquals(&props), "DeletionPolicy": "Delete"}
	}
	check(t, "idempotency table", func() { s.tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), table("id", true)) })
	check(t, "payments table", func() { s.tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), table("payment_id", false)) })
	check(t, "orders table", func() { s.tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), table("processing_id", false)) })
}

func TestFunctions(t *testing.T) {
	s := synth(t)
	st := s.stack
	check(t, "three functions", func() { s.tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(3)) })
	for _, tc := range []struct {
		fn  awslambda.Function
		env map[string]any
	}{
		{st.PaymentsFunction, map[string]any{
			"IDEMPOTENCY_TABLE": st.Stack.Resolve(st.IdempotencyTable.TableName()),
			"PAYMENTS_TABLE":    st.Stack.Resolve(st.PaymentsTable.TableName()),
		}},
		{st.ConfirmationFunction, map[string]any{
			"IDEMPOTENCY_TABLE": st.Stack.Resolve(st.IdempotencyTable.TableName()),
		}},
		{st.OrdersFunction, map[string]any{
			"IDEMPOTENCY_TABLE": st.Stack.Resolve(st.IdempotencyTable.TableName()),
			"ORDERS_TABLE":      st.Stack.Resolve(st.OrdersTable.TableName()),
		}},
	} {
		check(t, *tc.fn.Node().Id(), func() {
			s.tmpl.HasResource(jsii.String("AWS::Lambda::Function"), map[string]any{
				"Metadata": map[string]any{"aws:cdk:path": *tc.fn.Node().Path() + "/Resource"},
				"Properties": map[string]any{
					"Runtime":       "provided.al2023",
					"Architectures": []any{"arm64"},
					"Handler":       "bootstrap",
					"Timeout":       10,
					"MemorySize":    256,
					"Environment":   map[string]any{"Variables": assertions.Match_ObjectEquals(&tc.env)},
				},
			})
		})
	}
}

func TestPolicies(t *testing.T) {
	s := synth(t)
	st := s.stack
	arn := func(v *string) any { return st.Stack.Resolve(v) }
	records := map[string]any{
		"Effect":   "Allow",
		"Action":   []any{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
		"Resource": arn(st.IdempotencyTable.TableArn()),
	}
	put := func(v *string) map[string]any {
		return map[string]any{"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": arn(v)}
	}
	consume := map[string]any{
		"Effect": "Allow",
		"Action": []any{
			"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
			"sqs:GetQueueUrl", "sqs:ReceiveMessage",
		},
		"Resource": arn(st.OrdersQueue.QueueArn()),
	}
	for _, tc := range []struct {
		fn         awslambda.Function
		statements []map[string]any
	}{
		{st.PaymentsFunction, []map[string]any{records, put(st.PaymentsTable.TableArn())}},
		{st.ConfirmationFunction, []map[string]any{records}},
		{st.OrdersFunction, []map[string]any{records, put(st.OrdersTable.TableArn()), consume}},
	} {
		var want []any
		for _, stmt := range tc.statements {
			want = append(want, assertions.Match_ObjectEquals(&stmt))
		}
		check(t, *tc.fn.Node().Id(), func() {
			s.tmpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
				"Roles": []any{st.Stack.Resolve(tc.fn.Role().RoleName())},
				// Every expected statement, and no other: arrays match
				// element by element.
				"PolicyDocument": map[string]any{"Statement": want},
			})
		})
	}
	check(t, "one policy per function", func() { s.tmpl.ResourceCountIs(jsii.String("AWS::IAM::Policy"), jsii.Number(3)) })
}

// TestAccess checks the permissions of each function as a whole, whatever
// shape the CDK gives its policies: the store's four actions on the
// idempotency table, PutItem on the ledger, the consumer's actions on its
// queue, and nothing else.
func TestAccess(t *testing.T) {
	s := synth(t)
	f, err := cdkFacts(s.json, s.assetCode)
	require.NoError(t, err)
	records := []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
	put := []string{"dynamodb:PutItem"}
	assert.Equal(t, map[string]map[string][]string{
		"PaymentsFunction":     {"IdempotencyTable": records, "PaymentsTable": put},
		"ConfirmationFunction": {"IdempotencyTable": records},
		"OrdersFunction": {"IdempotencyTable": records, "OrdersTable": put, "OrdersQueue": {
			"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
			"sqs:GetQueueUrl", "sqs:ReceiveMessage",
		}},
	}, map[string]map[string][]string{
		"PaymentsFunction":     f.Functions["PaymentsFunction"].Access,
		"ConfirmationFunction": f.Functions["ConfirmationFunction"].Access,
		"OrdersFunction":       f.Functions["OrdersFunction"].Access,
	})
	assert.Len(t, f.Functions, 3)
}

// TestNoWildcards checks every policy statement of the template, the
// CDK's own included: no "*" in an action or a resource.
func TestNoWildcards(t *testing.T) {
	s := synth(t)
	n := 0
	for id, r := range asMap(s.json["Resources"]) {
		r := asMap(r)
		if r["Type"] != "AWS::IAM::Policy" {
			continue
		}
		for _, stmt := range asList(asMap(asMap(r["Properties"])["PolicyDocument"])["Statement"]) {
			n++
			for _, a := range asStrings(asMap(stmt)["Action"]) {
				assert.NotContains(t, a, "*", "%s: action", id)
			}
			for _, res := range asStrings(asMap(stmt)["Resource"]) {
				assert.NotContains(t, res, "*", "%s: resource", id)
			}
			// A resource built with Fn::Join (an index ARN, say) is not
			// a plain reference to a resource of the stack.
			res := asMap(stmt)["Resource"]
			if _, isList := res.([]any); !isList {
				res = []any{res}
			}
			for _, r := range asList(res) {
				assert.True(t, (&extractor{}).logicalRef(r) != "", "%s: resource %v is not a resource of the stack", id, r)
			}
		}
	}
	assert.Equal(t, 6, n, "policy statements")
}

func TestRoute(t *testing.T) {
	s := synth(t)
	check(t, "one route", func() { s.tmpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Route"), jsii.Number(1)) })
	check(t, "route", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{"RouteKey": "POST /payments"})
	})
	check(t, "integration", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Integration"), map[string]any{
			"IntegrationType":      "AWS_PROXY",
			"IntegrationUri":       s.stack.Stack.Resolve(s.stack.PaymentsFunction.FunctionArn()),
			"PayloadFormatVersion": "2.0",
		})
	})
}

func TestOrdersConsumer(t *testing.T) {
	s := synth(t)
	st := s.stack
	check(t, "event source", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), assertions.Match_ObjectEquals(&map[string]any{
			"EventSourceArn":        st.Stack.Resolve(st.OrdersQueue.QueueArn()),
			"FunctionName":          st.Stack.Resolve(st.OrdersFunction.FunctionName()),
			"BatchSize":             10,
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		}))
	})
	check(t, "queue", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), assertions.Match_ObjectEquals(&map[string]any{
			"VisibilityTimeout": 60,
			"RedrivePolicy": map[string]any{
				"deadLetterTargetArn": st.Stack.Resolve(st.OrdersDeadLetterQueue.QueueArn()),
				"maxReceiveCount":     5,
			},
		}))
	})
	check(t, "dead-letter queue", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), assertions.Match_ObjectEquals(&map[string]any{
			"MessageRetentionPeriod": 1209600,
		}))
	})
}

func TestOutputs(t *testing.T) {
	s := synth(t)
	for _, name := range []string{"PaymentsApi", "IdempotencyTableName", "PaymentsTableName", "OrdersTableName", "OrdersQueueUrl", "ConfirmationFunctionName"} {
		check(t, name, func() { s.tmpl.HasOutput(jsii.String(name), map[string]any{}) })
	}
}

// TestValidationFailsSynthesis checks that featureFlags make the CDK's
// built-in CloudFormation validation fail synthesis, so that every test
// here also checks that the template is valid.
func TestValidationFailsSynthesis(t *testing.T) {
	app := newApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), StackTraces: jsii.Bool(false)})
	stack := awscdk.NewStack(app, jsii.String("Invalid"), nil)
	// A table without its required key schema.
	awscdk.NewCfnResource(stack, jsii.String("Table"), &awscdk.CfnResourceProps{
		Type:       jsii.String("AWS::DynamoDB::Table"),
		Properties: &map[string]any{"BillingMode": "PAY_PER_REQUEST"},
	})
	defer func() {
		r := recover()
		require.NotNil(t, r, "synthesis succeeded")
		assert.Contains(t, fmt.Sprint(r), "Validation failed")
	}()
	app.Synth(nil)
}
