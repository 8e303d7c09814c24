package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/retrysafe/retrysafe/examples/function/confirmation"
	"github.com/retrysafe/retrysafe/examples/orders/order"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// The build contract of every example (see the Makefile's build target):
// a bootstrap executable for the OS-only runtime, built by SAM's Go
// builder.
const (
	runtime      = "provided.al2023"
	handler      = "bootstrap"
	architecture = "arm64"
	buildMethod  = "go1.x"
)

// function is what the template must say about one function of an
// example whose core this test can import.
type function struct {
	codeURI string
	// env maps the variables the example's main package reads to the
	// resource each must reference.
	env map[string]string
	// ledger is the example's own table, with the actions its client
	// interface can perform; "" for none.
	ledger        string
	ledgerActions []string
}

// functions are the functions of the examples this test knows. Functions
// of the template missing here get the checks every function gets
// (runtime, handler, architecture, build method, the idempotency table's
// variable and exact IAM actions, no wildcard resource); add them here
// when their core exports its variables.
var functions = map[string]function{
	"PaymentsFunction": {
		codeURI:       "examples/payments/",
		env:           envOf(payment.EnvVars, map[string]string{payment.EnvIdempotencyTable: "IdempotencyTable", payment.EnvPaymentsTable: "PaymentsTable"}),
		ledger:        "PaymentsTable",
		ledgerActions: actionsOf[payment.LedgerClient](),
	},
	"ConfirmationFunction": {
		codeURI: "examples/function/",
		env:     envOf(confirmation.EnvVars, map[string]string{confirmation.EnvIdempotencyTable: "IdempotencyTable"}),
	},
	"OrdersFunction": {
		codeURI:       "examples/orders/",
		env:           envOf(order.EnvVars, map[string]string{order.EnvIdempotencyTable: "IdempotencyTable", order.EnvOrdersTable: "OrdersTable"}),
		ledger:        "OrdersTable",
		ledgerActions: actionsOf[order.OrdersClient](),
	},
}

// envOf returns the expected variables: exactly names, each referencing
// the resource refs gives it.
func envOf(names []string, refs map[string]string) map[string]string {
	env := map[string]string{}
	for _, n := range names {
		env[n] = refs[n]
	}
	return env
}

// actionsOf returns the IAM actions of the DynamoDB operations a client
// interface has: what code that only holds the interface can do.
// TransactWriteItems is no IAM action of its own: each item of a
// transaction is authorised as its PutItem, UpdateItem, DeleteItem or
// ConditionCheckItem, and the store's own item is the completion's
// UpdateItem.
func actionsOf[Client any]() []string {
	t := reflect.TypeFor[Client]()
	var actions []string
	for i := range t.NumMethod() {
		name := t.Method(i).Name
		if name == "TransactWriteItems" {
			name = "UpdateItem"
		}
		if !slices.Contains(actions, "dynamodb:"+name) {
			actions = append(actions, "dynamodb:"+name)
		}
	}
	slices.Sort(actions)
	return actions
}

// idempotencyActions are the actions of the DynamoDB store: the methods of
// its Client interface.
var idempotencyActions = actionsOf[ddbstore.Client]()

func TestIdempotencyActions(t *testing.T) {
	// The store documents these four; the interface must not grow without
	// the template's policies.
	assert.Equal(t, []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, idempotencyActions)
	assert.Equal(t, []string{"dynamodb:PutItem"}, actionsOf[payment.LedgerClient]())
	assert.Equal(t, []string{"dynamodb:PutItem"}, actionsOf[order.OrdersClient]())
}

// tableRecorder is a DynamoDB table client that records what CreateTable
// asks for, and reports every table ACTIVE.
type tableRecorder struct {
	create *dynamodb.CreateTableInput
	ttl    *dynamodb.UpdateTimeToLiveInput
}

func (r *tableRecorder) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	r.create = in
	return &dynamodb.CreateTableOutput{}, nil
}

func (r *tableRecorder) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableName: in.TableName, TableStatus: types.TableStatusActive}}, nil
}

func (r *tableRecorder) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	r.ttl = in
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

// The idempotency table is the table the store's CreateTable makes with
// its default options: key schema, attribute types, billing mode and TTL
// attribute.
func TestIdempotencyTable(t *testing.T) {
	tmpl := loadTemplate(t)
	var want tableRecorder
	require.NoError(t, ddbstore.CreateTable(t.Context(), &want, "IdempotencyTable"))
	require.NotNil(t, want.ttl)

	table := tmpl.resource(t, "IdempotencyTable", "AWS::DynamoDB::Table")
	checkTable(t, table, want.create)
	ttl := get(table, "Properties", "TimeToLiveSpecification")
	assert.Equal(t, *want.ttl.TimeToLiveSpecification.AttributeName, scalar(get(ttl, "AttributeName")), "TTL attribute")
	assert.Equal(t, "true", scalar(get(ttl, "Enabled")))
}

// The ledger is the table CreateLedgerTable makes, which the example's
// local runs use.
func TestPaymentsTable(t *testing.T) {
	tmpl := loadTemplate(t)
	var want tableRecorder
	require.NoError(t, payment.CreateLedgerTable(t.Context(), &want, "PaymentsTable"))
	checkTable(t, tmpl.resource(t, "PaymentsTable", "AWS::DynamoDB::Table"), want.create)
}

// The orders table is the table CreateOrdersTable makes, which the
// example's tests use.
func TestOrdersTable(t *testing.T) {
	tmpl := loadTemplate(t)
	var want tableRecorder
	require.NoError(t, order.CreateOrdersTable(t.Context(), &want, "OrdersTable"))
	checkTable(t, tmpl.resource(t, "OrdersTable", "AWS::DynamoDB::Table"), want.create)
}

// checkTable compares a table resource with a CreateTable request.
func checkTable(t *testing.T, table *yaml.Node, want *dynamodb.CreateTableInput) {
	t.Helper()
	require.NotNil(t, want)
	props := get(table, "Properties")
	assert.Equal(t, string(want.BillingMode), scalar(get(props, "BillingMode")), "billing mode")

	wantDefs := map[string]string{}
	for _, d := range want.AttributeDefinitions {
		wantDefs[*d.AttributeName] = string(d.AttributeType)
	}
	gotDefs := map[string]string{}
	for _, d := range items(get(props, "AttributeDefinitions")) {
		gotDefs[scalar(get(d, "AttributeName"))] = scalar(get(d, "AttributeType"))
	}
	assert.Equal(t, wantDefs, gotDefs, "attribute definitions")

	var wantKeys, gotKeys []string
	for _, k := range want.KeySchema {
		wantKeys = append(wantKeys, *k.AttributeName+" "+string(k.KeyType))
	}
	for _, k := range items(get(props, "KeySchema")) {
		gotKeys = append(gotKeys, scalar(get(k, "AttributeName"))+" "+scalar(get(k, "KeyType")))
	}
	assert.Equal(t, wantKeys, gotKeys, "key schema")
}

func TestFunctions(t *testing.T) {
	tmpl := loadTemplate(t)
	names := tmpl.resourcesOfType("AWS::Serverless::Function")
	for name := range functions {
		require.Contains(t, names, name)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			fn := tmpl.function(t, name)
			assert.Equal(t, runtime, fn.scalar("Runtime"))
			assert.Equal(t, handler, fn.scalar("Handler"))
			assert.Equal(t, []string{architecture}, scalars(fn.prop("Architectures")))
			assert.Equal(t, buildMethod, scalar(get(fn.resource, "Metadata", "BuildMethod")))
			timeout, err := strconv.Atoi(fn.scalar("Timeout"))
			if assert.NoError(t, err, "Timeout") {
				assert.Positive(t, timeout)
			}

			env := fn.environment(t)
			assert.Equal(t, "IdempotencyTable", env[payment.EnvIdempotencyTable], "every function gets the idempotency table")
			grants := policies(t, fn.prop("Policies"))
			assert.NotContains(t, grants, "*", "no statement on every resource")
			assert.Equal(t, idempotencyActions, grants["IdempotencyTable"], "exactly the store's actions on the idempotency table")

			want, known := functions[name]
			if !known {
				return
			}
			assert.Equal(t, want.codeURI, fn.scalar("CodeUri"))
			main, err := os.ReadFile(filepath.Join("..", want.codeURI, "main.go"))
			if assert.NoError(t, err, "CodeUri holds the example's main package") {
				assert.Contains(t, string(main), "package main")
			}
			assert.Equal(t, want.env, env, "the variables the example's main package reads, and nothing else")
			wantGrants := map[string][]string{"IdempotencyTable": idempotencyActions}
			if want.ledger != "" {
				wantGrants[want.ledger] = want.ledgerActions
			}
			assert.Equal(t, wantGrants, grants, "least privilege")
		})
	}
}

// The payments function is the HTTP API's POST /payments, the only method
// its handler accepts.
func TestPaymentsRoute(t *testing.T) {
	fn := loadTemplate(t).function(t, "PaymentsFunction")
	var routes []string
	for _, ev := range values(fn.prop("Events")) {
		if scalar(get(ev, "Type")) == "HttpApi" {
			routes = append(routes, scalar(get(ev, "Properties", "Method"))+" "+scalar(get(ev, "Properties", "Path")))
		}
	}
	assert.Equal(t, []string{"POST /payments"}, routes)
}

// The YAML helpers must read CloudFormation's short and long forms.
func TestIntrinsics(t *testing.T) {
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(`
short: !Ref Table
long: {Ref: Table}
att: !GetAtt Table.Arn
attList: !GetAtt [Table, Arn]
attLong: {"Fn::GetAtt": [Table, Arn]}
sub: !Sub "${Table.Arn}"
subLong: {"Fn::Sub": "${Table.Arn}"}
subIndex: !Sub "${Table.Arn}/index/*"
plain: arn:aws:dynamodb:us-east-1:123456789012:table/x
`), &doc))
	root := doc.Content[0]
	for _, k := range []string{"short", "long"} {
		name, ok := ref(get(root, k))
		assert.True(t, ok, k)
		assert.Equal(t, "Table", name, k)
	}
	for k, want := range map[string]string{"att": "Table", "attList": "Table", "attLong": "Table", "sub": "Table", "subLong": "Table", "subIndex": "Table/index/*", "plain": ""} {
		assert.Equal(t, want, arnOf(get(root, k)), k)
	}
}

// template is a parsed template.yaml.
type template struct{ root *yaml.Node }

func loadTemplate(t *testing.T) template {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "template.yaml"))
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &doc))
	require.Len(t, doc.Content, 1)
	return template{root: doc.Content[0]}
}

func (tm template) resource(t *testing.T, name, typ string) *yaml.Node {
	t.Helper()
	r := get(tm.root, "Resources", name)
	require.NotNil(t, r, "resource %s", name)
	require.Equal(t, typ, scalar(get(r, "Type")), "type of %s", name)
	return r
}

func (tm template) resourcesOfType(typ string) []string {
	var names []string
	res := get(tm.root, "Resources")
	for i := 0; res != nil && i+1 < len(res.Content); i += 2 {
		if scalar(get(res.Content[i+1], "Type")) == typ {
			names = append(names, res.Content[i].Value)
		}
	}
	return names
}

// fn is a function resource with the template's Globals.
type fn struct {
	resource *yaml.Node
	globals  *yaml.Node
}

func (tm template) function(t *testing.T, name string) fn {
	return fn{resource: tm.resource(t, name, "AWS::Serverless::Function"), globals: get(tm.root, "Globals", "Function")}
}

// prop returns a property, from the function or else from Globals, as
// SAM merges them for scalars and lists.
func (f fn) prop(name string) *yaml.Node {
	if n := get(f.resource, "Properties", name); n != nil {
		return n
	}
	return get(f.globals, name)
}

func (f fn) scalar(name string) string { return scalar(f.prop(name)) }

// environment returns the function's variables, Globals' and its own (SAM
// merges the maps), each with the resource it references, or its value.
func (f fn) environment(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, vars := range []*yaml.Node{get(f.globals, "Environment", "Variables"), get(f.resource, "Properties", "Environment", "Variables")} {
		for i := 0; vars != nil && i+1 < len(vars.Content); i += 2 {
			v := vars.Content[i+1]
			if name, ok := ref(v); ok {
				env[vars.Content[i].Value] = name
			} else {
				env[vars.Content[i].Value] = scalar(v)
			}
		}
	}
	return env
}

// policies returns the actions the inline policies grant, by the resource
// each statement names ("*" for a wildcard, the ARN for others). Only
// inline statements that allow actions on resources are accepted: managed
// policies and SAM policy templates grant more than the examples need.
func policies(t *testing.T, n *yaml.Node) map[string][]string {
	t.Helper()
	grants := map[string][]string{}
	for _, p := range items(n) {
		stmts := get(p, "Statement")
		if !assert.NotNil(t, stmts, "an inline policy document, not a managed policy or a policy template: %s", scalar(p)) {
			continue
		}
		for _, s := range items(stmts) {
			assert.Equal(t, "Allow", scalar(get(s, "Effect")))
			actions := scalars(get(s, "Action"))
			for _, r := range items(get(s, "Resource")) {
				res := arnOf(r)
				if res == "" {
					res = scalar(r)
				}
				grants[res] = append(grants[res], actions...)
			}
		}
	}
	for r, actions := range grants {
		slices.Sort(actions)
		grants[r] = slices.Compact(actions)
	}
	return grants
}

// get follows mapping keys from n; nil if one is missing.
func get(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// items returns the elements of a sequence, or n itself when it is a
// single value (CloudFormation accepts both for lists).
func items(n *yaml.Node) []*yaml.Node {
	switch {
	case n == nil:
		return nil
	case n.Kind == yaml.SequenceNode:
		return n.Content
	}
	return []*yaml.Node{n}
}

func scalars(n *yaml.Node) []string {
	var s []string
	for _, it := range items(n) {
		s = append(s, scalar(it))
	}
	return s
}

// values returns the values of a mapping.
func values(n *yaml.Node) []*yaml.Node {
	var vs []*yaml.Node
	for i := 1; n != nil && n.Kind == yaml.MappingNode && i < len(n.Content); i += 2 {
		vs = append(vs, n.Content[i])
	}
	return vs
}

// ref returns the logical name of !Ref X or {Ref: X}.
func ref(n *yaml.Node) (string, bool) {
	switch {
	case n == nil:
		return "", false
	case n.Tag == "!Ref":
		return n.Value, true
	case get(n, "Ref") != nil:
		return scalar(get(n, "Ref")), true
	}
	return "", false
}

// arnOf returns the resource whose ARN n is, from !GetAtt X.Arn (and its
// list and long forms) or !Sub "${X.Arn}...", with what follows the ARN:
// "X" or "X/index/*". It returns "" for anything else.
func arnOf(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	var att, sub *yaml.Node
	switch {
	case n.Tag == "!GetAtt":
		att = n
	case n.Tag == "!Sub":
		sub = n
	case get(n, "Fn::GetAtt") != nil:
		att = get(n, "Fn::GetAtt")
	case get(n, "Fn::Sub") != nil:
		sub = get(n, "Fn::Sub")
	}
	switch {
	case att != nil && att.Kind == yaml.ScalarNode:
		if name, ok := strings.CutSuffix(att.Value, ".Arn"); ok {
			return name
		}
	case att != nil && att.Kind == yaml.SequenceNode && len(att.Content) == 2 && att.Content[1].Value == "Arn":
		return att.Content[0].Value
	case sub != nil && sub.Kind == yaml.ScalarNode && strings.HasPrefix(sub.Value, "${"):
		name, rest, ok := strings.Cut(strings.TrimPrefix(sub.Value, "${"), ".Arn}")
		if ok && !strings.ContainsAny(name, "${}") {
			return name + rest
		}
	}
	return ""
}
