package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TableClient is the part of the DynamoDB API that CreateTable uses;
// *dynamodb.Client satisfies it.
type TableClient interface {
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ TableClient = (*dynamodb.Client)(nil)

// CreateTable creates a table for a Store with the same options. The
// table has the key schema (KeyAttr, plus SortKeyAttr if set, both
// strings), on-demand capacity, and time to live on ExpiryAttr. CreateTable
// waits until the table is ACTIVE, polling DescribeTable for as long as ctx
// allows.
//
// CreateTable is meant for local runs and tests, against dynalite, DynamoDB
// Local or LocalStack. Production tables belong in the application's
// infrastructure template (AWS SAM, CDK, CloudFormation), next to the
// function, with the same key schema and TTL attribute.
//
// The table may exist already. Then CreateTable checks that its key schema
// is the one the options describe and waits until it is ACTIVE. It leaves
// its time to live as it is. A server that does not know UpdateTimeToLive
// (dynalite) is not an error. The store never relies on TTL, which only
// deletes expired records eventually.
func CreateTable(ctx context.Context, client TableClient, table string, optFns ...func(*Options)) error {
	opts, err := resolveOptions(optFns)
	if err != nil {
		return err
	}
	defs := []types.AttributeDefinition{{AttributeName: &opts.KeyAttr, AttributeType: types.ScalarAttributeTypeS}}
	if opts.SortKeyAttr != "" {
		defs = append(defs, types.AttributeDefinition{AttributeName: &opts.SortKeyAttr, AttributeType: types.ScalarAttributeTypeS})
	}
	schema := keySchema(&opts)
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: defs,
		KeySchema:            schema,
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	existed := errors.As(err, &inUse)
	if err != nil && !existed {
		return fmt.Errorf("persistence/dynamodb: create table %q: %w", table, err)
	}

	desc, err := waitActive(ctx, client, table)
	if err != nil {
		return err
	}
	if existed {
		return checkKeySchema(table, desc, schema)
	}

	enabled := true
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: &opts.ExpiryAttr,
			Enabled:       &enabled,
		},
	})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnknownOperationException" {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("persistence/dynamodb: enable time to live on %q.%s: %w", table, opts.ExpiryAttr, err)
	}
	return nil
}

// waitActive polls DescribeTable until table is ACTIVE.
func waitActive(ctx context.Context, client TableClient, table string) (*types.TableDescription, error) {
	delay := 20 * time.Millisecond
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
		if err != nil {
			return nil, fmt.Errorf("persistence/dynamodb: describe table %q: %w", table, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			return out.Table, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("persistence/dynamodb: waiting for table %q to become ACTIVE: %w", table, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// ErrKeySchema is matched (with errors.Is) by the error of CheckTable and
// CreateTable for a table whose key schema is not the one the options
// describe.
var ErrKeySchema = errors.New("persistence/dynamodb: key schema mismatch")

// CheckTable checks, with one DescribeTable, that table exists and has the
// key schema of a [Store] with the same options. A tool, or a function at
// cold start, can thus report a missing table early. It can also report a
// KeyAttr or SortKeyAttr that is not the table's. Without the check, the
// first request would fail with a less clear error.
//
// Another key schema's error matches [ErrKeySchema]. A missing table's
// wraps the SDK's [*types.ResourceNotFoundException]. Other failures are
// returned wrapped. CheckTable needs dynamodb:DescribeTable.
//
// It also checks that the table is replicated across Regions as
// [Options.GlobalTable] says. It returns a [*GlobalTableError] (matching
// [ErrGlobalTable]) if not. A global table of eventual consistency (MREC)
// is refused unless the options state how its keys are written
// ([GlobalTableHomeRegion] or [GlobalTableLastWriterWins]). Two Regions can
// each reserve one key otherwise. A global table of strong consistency
// (MRSC) must be described as one ([GlobalTableStrong]). The store then
// refuses the transactions it does not run.
func CheckTable(ctx context.Context, client dynamodb.DescribeTableAPIClient, table string, optFns ...func(*Options)) error {
	opts, err := resolveOptions(optFns)
	if err != nil {
		return err
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return fmt.Errorf("persistence/dynamodb: describe table %q: %w", table, err)
	}
	if out.Table == nil {
		return fmt.Errorf("persistence/dynamodb: describe table %q: no table description", table)
	}
	if err := checkKeySchema(table, out.Table, keySchema(&opts)); err != nil {
		return err
	}
	return checkGlobalTable(table, out.Table, opts.GlobalTable)
}

// keySchema returns the key schema of a table for a Store with opts.
func keySchema(opts *Options) []types.KeySchemaElement {
	schema := []types.KeySchemaElement{{AttributeName: &opts.KeyAttr, KeyType: types.KeyTypeHash}}
	if opts.SortKeyAttr != "" {
		schema = append(schema, types.KeySchemaElement{AttributeName: &opts.SortKeyAttr, KeyType: types.KeyTypeRange})
	}
	return schema
}

func checkKeySchema(table string, desc *types.TableDescription, want []types.KeySchemaElement) error {
	describe := func(schema []types.KeySchemaElement) string {
		s := ""
		for _, k := range schema {
			if k.AttributeName != nil {
				s += fmt.Sprintf("[%s %s]", *k.AttributeName, k.KeyType)
			}
		}
		return s
	}
	if got := describe(desc.KeySchema); got != describe(want) {
		return fmt.Errorf("%w: table %q exists with key schema %s, the options describe %s", ErrKeySchema, table, got, describe(want))
	}
	return nil
}
