package idempotencytable_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/cdk/idempotencytable"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close() // stops the Node.js child process
	os.Exit(code)
}

// newStack returns a stack in a new app that synthesizes into a temporary
// directory of t. Synthesis fails if the CDK's built-in CloudFormation
// validation finds an error in the template (without the flag, it warns).
func newStack(t *testing.T) awscdk.Stack {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{
		Outdir:      jsii.String(t.TempDir()),
		StackTraces: jsii.Bool(false),
		Context:     &map[string]any{"@aws-cdk/core:validateAgainstDefaultRules": true},
	})
	return awscdk.NewStack(app, jsii.String("Test"), nil)
}

// synth synthesizes stack and returns its template. The CDK's assertion
// methods panic on a mismatch; check reports that as a test failure.
func synth(t *testing.T, stack awscdk.Stack) assertions.Template {
	t.Helper()
	var tmpl assertions.Template
	check(t, "synthesize", func() { tmpl = assertions.Template_FromStack(stack, nil) })
	if tmpl == nil {
		t.FailNow()
	}
	return tmpl
}

// check runs a CDK assertion and turns its panic into a failure of t.
func check(t *testing.T, what string, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assertion()
}

// stubFunction is a function with a dummy deployment package: the template
// is all these tests look at.
func stubFunction(t *testing.T, stack awscdk.Stack, id string) awslambda.Function {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n"), 0o755))
	return awslambda.NewFunction(stack, jsii.String(id), &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(dir), nil),
	})
}

// recordActions is RecordActions for a matcher.
func recordActions() []any {
	var actions []any
	for _, a := range idempotencytable.RecordActions() {
		actions = append(actions, a)
	}
	return actions
}

func TestDefaults(t *testing.T) {
	stack := newStack(t)
	records := idempotencytable.New(stack, "IdempotencyTable", nil)
	assert.Equal(t, "id", records.KeyAttr())
	assert.Equal(t, "", records.SortKeyAttr())
	assert.Equal(t, "expiration", records.ExpiryAttr())

	tmpl := synth(t, stack)
	check(t, "one table", func() { tmpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(1)) })
	check(t, "table", func() {
		tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"Properties": assertions.Match_ObjectEquals(&map[string]any{
				"KeySchema":               []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}},
				"AttributeDefinitions":    []any{map[string]any{"AttributeName": "id", "AttributeType": "S"}},
				"BillingMode":             "PAY_PER_REQUEST",
				"TimeToLiveSpecification": map[string]any{"AttributeName": "expiration", "Enabled": true},
			}),
			// Deleting the table would forget which requests have run.
			"DeletionPolicy":      "Retain",
			"UpdateReplacePolicy": "Retain",
		})
	})
}

func TestSortKeyAndNames(t *testing.T) {
	stack := newStack(t)
	records := idempotencytable.New(stack, "Shared", &idempotencytable.Props{
		TableName:     jsii.String("app-data"),
		KeyAttr:       "pk",
		SortKeyAttr:   "sk",
		ExpiryAttr:    "ttl",
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	assert.Equal(t, "pk", records.KeyAttr())
	assert.Equal(t, "sk", records.SortKeyAttr())
	assert.Equal(t, "ttl", records.ExpiryAttr())

	tmpl := synth(t, stack)
	check(t, "table", func() {
		tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"Properties": assertions.Match_ObjectEquals(&map[string]any{
				"TableName": "app-data",
				"KeySchema": []any{
					map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
					map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
				},
				"AttributeDefinitions": []any{
					map[string]any{"AttributeName": "pk", "AttributeType": "S"},
					map[string]any{"AttributeName": "sk", "AttributeType": "S"},
				},
				"BillingMode":             "PAY_PER_REQUEST",
				"TimeToLiveSpecification": map[string]any{"AttributeName": "ttl", "Enabled": true},
			}),
			"DeletionPolicy": "Delete",
		})
	})
}

func TestConflictingAttributesPanic(t *testing.T) {
	for name, props := range map[string]*idempotencytable.Props{
		"sort key is the key":    {SortKeyAttr: "id"},
		"expiry is the key":      {ExpiryAttr: "id"},
		"expiry is the sort key": {SortKeyAttr: "expiration"},
	} {
		t.Run(name, func(t *testing.T) {
			stack := newStack(t)
			assert.PanicsWithValue(t, panicMessage(props), func() { idempotencytable.New(stack, "T", props) })
		})
	}
}

func panicMessage(p *idempotencytable.Props) string {
	key, expiry := p.KeyAttr, p.ExpiryAttr
	if key == "" {
		key = "id"
	}
	if expiry == "" {
		expiry = "expiration"
	}
	return `idempotencytable: the key attribute "` + key + `", sort key attribute "` + p.SortKeyAttr +
		`" and expiry attribute "` + expiry + `" must differ`
}

func TestRecordActions(t *testing.T) {
	assert.Equal(t, []string{"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
		idempotencytable.RecordActions())
	// A fresh slice each time: a caller cannot widen another's grant.
	idempotencytable.RecordActions()[0] = "dynamodb:*"
	assert.Equal(t, "dynamodb:PutItem", idempotencytable.RecordActions()[0])
}

func TestGrantReadWriteRecords(t *testing.T) {
	for _, tc := range []struct{ given, want string }{
		{"", "IDEMPOTENCY_TABLE"},
		{"RECORDS", "RECORDS"},
	} {
		t.Run("env "+tc.want, func(t *testing.T) {
			stack := newStack(t)
			records := idempotencytable.New(stack, "IdempotencyTable", nil)
			// An index on the table must not widen the grant: the store
			// never queries one.
			records.Table().AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
				IndexName:    jsii.String("by-status"),
				PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("status"), Type: awsdynamodb.AttributeType_STRING},
			})
			fn := stubFunction(t, stack, "Handler")
			grant := records.GrantReadWriteRecords(fn, tc.given)
			assert.True(t, *grant.Success())

			tmpl := synth(t, stack)
			check(t, "environment", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
					"Environment": map[string]any{"Variables": assertions.Match_ObjectEquals(&map[string]any{
						tc.want: stack.Resolve(records.TableName()),
					})},
				})
			})
			check(t, "one policy", func() { tmpl.ResourceCountIs(jsii.String("AWS::IAM::Policy"), jsii.Number(1)) })
			check(t, "policy", func() {
				tmpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
					"PolicyDocument": map[string]any{"Statement": []any{assertions.Match_ObjectEquals(&map[string]any{
						"Effect":   "Allow",
						"Action":   recordActions(),
						"Resource": stack.Resolve(records.TableArn()),
					})}},
					"Roles": []any{stack.Resolve(fn.Role().RoleName())},
				})
			})
		})
	}
}

func TestGrantRecordsToRole(t *testing.T) {
	stack := newStack(t)
	records := idempotencytable.New(stack, "IdempotencyTable", &idempotencytable.Props{SortKeyAttr: "sk"})
	role := awsiam.NewRole(stack, jsii.String("TaskRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
	})
	records.GrantRecords(role)

	tmpl := synth(t, stack)
	check(t, "policy", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": []any{assertions.Match_ObjectEquals(&map[string]any{
				"Effect":   "Allow",
				"Action":   recordActions(),
				"Resource": stack.Resolve(records.TableArn()),
			})}},
			"Roles": []any{stack.Resolve(role.RoleName())},
		})
	})
}
