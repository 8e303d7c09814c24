package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// samTemplate is the SAM template of the examples, at the repository root.
var samTemplate = filepath.Join("..", "..", "template.yaml")

func loadSAM(t *testing.T) map[string]any {
	t.Helper()
	src, err := os.ReadFile(samTemplate)
	require.NoError(t, err)
	tmpl, err := parseCFNYAML(src)
	require.NoError(t, err)
	return tmpl
}

// TestMatchesSAMTemplate compares the facts of template.yaml with those of
// the synthesized stack, so that the two ways of deploying the examples
// cannot drift apart: a change to one must be made to the other.
func TestMatchesSAMTemplate(t *testing.T) {
	sam, err := samFacts(loadSAM(t))
	require.NoError(t, err)
	s := synth(t)
	cdk, err := cdkFacts(s.json, s.assetCode)
	require.NoError(t, err)

	// Not vacuous: everything template.yaml defines is there to compare.
	require.Len(t, sam.Tables, 3)
	require.Len(t, sam.Functions, 3)
	require.Len(t, sam.Queues, 2)
	require.Len(t, sam.Outputs, 6)

	sam, cdk = sam.tableAccess(), cdk.tableAccess()
	assert.Equal(t, sam.Tables, cdk.Tables, "tables")
	assert.Equal(t, sam.Queues, cdk.Queues, "queues")
	assert.Equal(t, sam.Outputs, cdk.Outputs, "outputs")
	for name, fn := range sam.Functions {
		assert.Equal(t, fn, cdk.Functions[name], "function %s", name)
	}
	assert.Len(t, cdk.Functions, len(sam.Functions), "functions")
}

// TestSAMFacts pins what the drift test reads from template.yaml, so that a
// normalisation that lost a fact on both sides alike would show here.
func TestSAMFacts(t *testing.T) {
	f, err := samFacts(loadSAM(t))
	require.NoError(t, err)
	records := []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}

	assert.Equal(t, tableFacts{Keys: []string{"id HASH S"}, BillingMode: "PAY_PER_REQUEST", TTL: "expiration", DeletionPolicy: "Delete"},
		f.Tables["IdempotencyTable"])
	assert.Equal(t, tableFacts{Keys: []string{"payment_id HASH S"}, BillingMode: "PAY_PER_REQUEST", DeletionPolicy: "Delete"},
		f.Tables["PaymentsTable"])
	assert.Equal(t, functionFacts{
		Code:          "payments",
		Description:   "POST /payments, made idempotent by the Idempotency-Key header",
		Runtime:       "provided.al2023",
		Architectures: []string{"arm64"},
		Handler:       "bootstrap",
		Timeout:       10,
		MemorySize:    256,
		Environment:   map[string]string{"IDEMPOTENCY_TABLE": "IdempotencyTable", "PAYMENTS_TABLE": "PaymentsTable"},
		Access:        map[string][]string{"IdempotencyTable": records, "PaymentsTable": {"dynamodb:PutItem"}},
		Routes:        []route{{Key: "POST /payments", PayloadFormat: "2.0"}},
	}, f.Functions["PaymentsFunction"])
	assert.Equal(t, []queueSource{{Queue: "OrdersQueue", BatchSize: 10, ResponseTypes: []string{"ReportBatchItemFailures"}}},
		f.Functions["OrdersFunction"].QueueSources)
	assert.Equal(t, map[string]string{"IDEMPOTENCY_TABLE": "IdempotencyTable"}, f.Functions["ConfirmationFunction"].Environment)
	assert.Equal(t, queueFacts{VisibilityTimeout: 60, DeadLetterQueue: "OrdersDeadLetterQueue", MaxReceiveCount: 5, DeletionPolicy: "Delete"},
		f.Queues["OrdersQueue"])
	assert.Equal(t, "${HttpApi.ApiEndpoint}/payments (The payments endpoint)", f.Outputs["PaymentsApi"])
	assert.Equal(t, "${IdempotencyTable} ()", f.Outputs["IdempotencyTableName"])
}

// TestDriftIsSeen changes template.yaml in memory the ways the CDK app
// could fall behind, and checks that the facts then differ.
func TestDriftIsSeen(t *testing.T) {
	s := synth(t)
	cdk, err := cdkFacts(s.json, s.assetCode)
	require.NoError(t, err)
	cdk = cdk.tableAccess()

	resource := func(tmpl map[string]any, id string) map[string]any {
		return asMap(asMap(asMap(tmpl["Resources"])[id])["Properties"])
	}
	for name, change := range map[string]func(map[string]any){
		"TTL attribute": func(tmpl map[string]any) {
			resource(tmpl, "IdempotencyTable")["TimeToLiveSpecification"] = map[string]any{"AttributeName": "expires_at", "Enabled": true}
		},
		"a wider grant": func(tmpl map[string]any) {
			stmt := asMap(asList(asMap(asList(resource(tmpl, "ConfirmationFunction")["Policies"])[0])["Statement"])[0])
			stmt["Action"] = append(asList(stmt["Action"]), "dynamodb:Scan")
		},
		"an environment variable": func(tmpl map[string]any) {
			env := asMap(asMap(resource(tmpl, "OrdersFunction")["Environment"])["Variables"])
			env["ORDERS_TABLE"] = map[string]any{"Ref": "PaymentsTable"}
		},
		"the global memory size": func(tmpl map[string]any) {
			asMap(asMap(tmpl["Globals"])["Function"])["MemorySize"] = 512
		},
		"a route": func(tmpl map[string]any) {
			events := asMap(resource(tmpl, "PaymentsFunction")["Events"])
			asMap(asMap(events["CreatePayment"])["Properties"])["Path"] = "/charges"
		},
		"batch item failures": func(tmpl map[string]any) {
			events := asMap(resource(tmpl, "OrdersFunction")["Events"])
			delete(asMap(asMap(events["Orders"])["Properties"]), "FunctionResponseTypes")
		},
		"the redrive policy": func(tmpl map[string]any) {
			asMap(resource(tmpl, "OrdersQueue")["RedrivePolicy"])["maxReceiveCount"] = 3
		},
		"an output": func(tmpl map[string]any) {
			delete(asMap(tmpl["Outputs"]), "OrdersQueueUrl")
		},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := loadSAM(t)
			sam, err := samFacts(tmpl)
			require.NoError(t, err)
			require.Equal(t, sam.tableAccess(), cdk, "before the change")

			change(tmpl)
			sam, err = samFacts(tmpl)
			require.NoError(t, err)
			assert.NotEqual(t, sam.tableAccess(), cdk)
		})
	}
}

func TestParseCFNYAML(t *testing.T) {
	tmpl, err := parseCFNYAML([]byte(`
A: !Ref Table
B: !GetAtt Table.Arn
C: !GetAtt [Table, StreamArn]
D: !Sub "arn:${AWS::Partition}:x:::${Table}"
E: !Join ["", [!Ref Api, "/payments"]]
F: !Sub
  - "${Name}-x"
  - Name: !Ref Table
G: plain
H: 10
I: true
`))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"A": map[string]any{"Ref": "Table"},
		"B": map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}},
		"C": map[string]any{"Fn::GetAtt": []any{"Table", "StreamArn"}},
		"D": map[string]any{"Fn::Sub": "arn:${AWS::Partition}:x:::${Table}"},
		"E": map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Ref": "Api"}, "/payments"}}},
		"F": map[string]any{"Fn::Sub": []any{"${Name}-x", map[string]any{"Name": map[string]any{"Ref": "Table"}}}},
		"G": "plain",
		"H": 10,
		"I": true,
	}, tmpl)

	_, err = parseCFNYAML([]byte("A: !GetAtt Table\n"))
	assert.ErrorContains(t, err, "Resource.Attribute")
}
