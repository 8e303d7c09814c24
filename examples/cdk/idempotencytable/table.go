// Package idempotencytable is an AWS CDK construct for the DynamoDB table of
// retrysafe's DynamoDB store (github.com/retrysafe/retrysafe/persistence/dynamodb).
//
// The table follows the store's defaults: a string partition key "id", an
// optional string sort key for a table shared with other data (a
// single-table design), on-demand capacity (PAY_PER_REQUEST), and time to
// live on "expiration", so that DynamoDB removes expired records eventually.
// The store never relies on TTL for correctness; it only keeps the table
// small.
//
// GrantReadWriteRecords gives a function exactly the four actions the store
// sends (dynamodb:PutItem, GetItem, UpdateItem and DeleteItem) on this table
// and nothing else, and sets the function's environment variable that
// carries the table name.
//
// The attribute names given here must be the ones the store is configured
// with (persistence/dynamodb.Options: KeyAttr, SortKeyAttr, ExpiryAttr); the
// zero values of both sides agree.
package idempotencytable

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Defaults of Props, the same as those of persistence/dynamodb.Options.
const (
	// DefaultKeyAttr is the partition key attribute.
	DefaultKeyAttr = "id"
	// DefaultExpiryAttr is the record expiry attribute (epoch seconds), the
	// table's TTL attribute.
	DefaultExpiryAttr = "expiration"
	// DefaultEnvVar is the environment variable GrantReadWriteRecords sets
	// when it is given no name; the examples read the table name from it.
	DefaultEnvVar = "IDEMPOTENCY_TABLE"
)

// RecordActions returns the IAM actions the DynamoDB store needs on its
// table, one for each request it sends: PutItem (reserve), GetItem (read a
// conflicting record), UpdateItem (complete) and DeleteItem (release).
func RecordActions() []string {
	return []string{"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
}

// Props configures a Table. The zero value (or nil) gives the store's
// defaults.
type Props struct {
	// TableName is the physical table name. Default: a name CloudFormation
	// generates, which lets the stack replace the table and be deployed
	// more than once per account and region.
	TableName *string

	// KeyAttr is the partition key attribute (type S), Options.KeyAttr of
	// the store. Default DefaultKeyAttr.
	KeyAttr string

	// SortKeyAttr, when set, adds a sort key (type S) for a table shared
	// with other data; configure the store with the same
	// Options.SortKeyAttr. Default: no sort key.
	SortKeyAttr string

	// ExpiryAttr is the TTL attribute, Options.ExpiryAttr of the store.
	// Default DefaultExpiryAttr.
	ExpiryAttr string

	// RemovalPolicy applies when the table leaves the stack. Default: the
	// CDK's default for tables, RETAIN, since deleting the table forgets
	// which requests have run, and retries would run them again.
	RemovalPolicy awscdk.RemovalPolicy
}

// Table is a DynamoDB table for idempotency records, with the attribute
// names it was defined with.
//
// Table is a Go value, not a construct node of its own: Go types cannot
// extend jsii classes with fields, and a Go value that embeds a construct
// cannot be passed back to the CDK. The node is Table(), an ordinary
// awsdynamodb.Table, at the path New was given.
type Table struct {
	table       awsdynamodb.Table
	keyAttr     string
	sortKeyAttr string
	expiryAttr  string
}

// New defines an idempotency table in scope, under id. props may be nil.
//
// New panics, as CDK constructs do on invalid input, if two of the key and
// expiry attributes have the same name.
func New(scope constructs.Construct, id string, props *Props) *Table {
	var p Props
	if props != nil {
		p = *props
	}
	t := &Table{
		keyAttr:     orDefault(p.KeyAttr, DefaultKeyAttr),
		sortKeyAttr: p.SortKeyAttr,
		expiryAttr:  orDefault(p.ExpiryAttr, DefaultExpiryAttr),
	}
	if t.keyAttr == t.sortKeyAttr || t.keyAttr == t.expiryAttr || t.sortKeyAttr == t.expiryAttr {
		panic(fmt.Sprintf("idempotencytable: the key attribute %q, sort key attribute %q and expiry attribute %q must differ",
			t.keyAttr, t.sortKeyAttr, t.expiryAttr))
	}

	tp := &awsdynamodb.TableProps{
		TableName:           p.TableName,
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(t.keyAttr), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(t.expiryAttr),
		RemovalPolicy:       p.RemovalPolicy,
	}
	if t.sortKeyAttr != "" {
		tp.SortKey = &awsdynamodb.Attribute{Name: jsii.String(t.sortKeyAttr), Type: awsdynamodb.AttributeType_STRING}
	}
	t.table = awsdynamodb.NewTable(scope, jsii.String(id), tp)
	return t
}

// Table returns the DynamoDB table construct, for what this package does
// not cover (alarms, backups, escape hatches), and as a scope or a
// dependency.
func (t *Table) Table() awsdynamodb.Table { return t.table }

// TableName returns the table's name (a token until deployment).
func (t *Table) TableName() *string { return t.table.TableName() }

// TableArn returns the table's ARN (a token until deployment).
func (t *Table) TableArn() *string { return t.table.TableArn() }

// KeyAttr returns the partition key attribute.
func (t *Table) KeyAttr() string { return t.keyAttr }

// SortKeyAttr returns the sort key attribute, or "" without a sort key.
func (t *Table) SortKeyAttr() string { return t.sortKeyAttr }

// ExpiryAttr returns the TTL attribute.
func (t *Table) ExpiryAttr() string { return t.expiryAttr }

// GrantRecords gives grantee RecordActions on this table, and nothing else:
// no index, no stream, no other table. Use it for principals other than a
// Lambda function (an ECS task role, say); for a function,
// GrantReadWriteRecords also passes it the table name.
func (t *Table) GrantRecords(grantee awsiam.IGrantable) awsiam.Grant {
	// Table.Grant would also name the table's indexes; the store reads only
	// the table itself, so the statement is written out here.
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings(RecordActions()...),
		ResourceArns: jsii.Strings(*t.table.TableArn()),
	})
}

// GrantReadWriteRecords gives fn RecordActions on this table, and nothing
// else, and sets fn's environment variable envVarName (DefaultEnvVar when
// empty) to the table name.
func (t *Table) GrantReadWriteRecords(fn awslambda.Function, envVarName string) awsiam.Grant {
	fn.AddEnvironment(jsii.String(orDefault(envVarName, DefaultEnvVar)), t.table.TableName(), nil)
	return t.GrantRecords(fn)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
