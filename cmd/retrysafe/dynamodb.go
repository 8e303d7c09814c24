package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// openDynamoDB opens table with the SDK's standard configuration and
// checks that it exists with the key schema of the flags.
func openDynamoDB(ctx context.Context, e *env, f *storeFlags, table string) (*store, error) {
	if f.sortKeyAttr == "" && (f.staticPK != "" || f.pkFnName != "") {
		return nil, usageError("--static-pk and --pk-function name the partition key value of records under a sort key: give --sort-key-attr too")
	}
	loadOpts := []func(*config.LoadOptions) error{
		// An endpoint that takes the connection and never answers (a
		// wrong port forward, a dead proxy) would hold the command for
		// ever: the SDK's client has no timeout of its own.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(f.requestTimeout)),
		// The SDK's warnings (a Date header it cannot parse, a body it
		// could not discard) would land in the progress line, in local
		// time; the command reports what fails itself, as for Redis.
		config.WithLogger(logging.Nop{}),
		config.WithClientLogMode(0),
	}
	if f.profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(f.profile))
	}
	if f.region != "" {
		loadOpts = append(loadOpts, config.WithRegion(f.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, usageError("no AWS region: give --region, or set AWS_REGION or the profile's region")
	}
	optFn := func(o *ddbstore.Options) {
		o.KeyAttr, o.SortKeyAttr, o.StaticPKValue = f.keyAttr, f.sortKeyAttr, f.staticPK
		if o.SortKeyAttr != "" && o.StaticPKValue == "" && f.pkFnName != "" {
			o.StaticPKValue = "idempotency#" + f.pkFnName // the store's default, with another function's name
		}
		for i, a := range attrNames {
			*a.dynamo(o) = f.attrs[i]
		}
	}
	client := awsdynamodb.NewFromConfig(cfg)
	where := fmt.Sprintf("DynamoDB table %q in %s", table, cfg.Region)
	if ep := e.getenv("AWS_ENDPOINT_URL_DYNAMODB"); ep != "" {
		where += " at " + ep
	} else if ep := e.getenv("AWS_ENDPOINT_URL"); ep != "" {
		where += " at " + ep
	}
	s, err := ddbstore.New(client, table, optFn)
	if err != nil {
		return nil, usageError("%v", strings.TrimPrefix(err.Error(), "persistence/dynamodb: "))
	}
	// strong is true for a global table of multi-Region strong
	// consistency (MRSC), which has no time to live.
	strong := false
	if err := ddbstore.CheckTable(ctx, client, table, optFn); err != nil {
		if t := timedOut(ctx, where, err, f.requestTimeout, f.timeout); t != nil {
			return nil, t
		}
		var (
			missing *types.ResourceNotFoundException
			apiErr  smithy.APIError
			global  *ddbstore.GlobalTableError
		)
		switch {
		case errors.As(err, &missing):
			return nil, fmt.Errorf("%s does not exist: check --table, --region and --profile", where)
		case errors.As(err, &apiErr) && apiErr.ErrorCode() == "AccessDeniedException":
			// The check is a courtesy: an operator allowed to read the
			// records but not to describe the table goes on without it.
		case errors.As(err, &global):
			// A global table that the flags do not describe: that is the
			// function's choice to state (Options.GlobalTable). The
			// command reserves nothing and commits nothing, and its
			// deletes are conditioned on the record it read.
			strong = global.Consistency == types.MultiRegionConsistencyStrong
		case errors.Is(err, ddbstore.ErrKeySchema):
			return nil, fmt.Errorf("%s: %w; give the key attributes of the function's store (--key-attr, --sort-key-attr)", where, err)
		default:
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	selfSweeping := func(ctx context.Context) (string, error) {
		return ttlDeletes(ctx, e, client, where, table, expiryAttr(optFn), strong)
	}
	return &store{
		name:           where,
		requestTimeout: f.requestTimeout,
		timeout:        f.timeout,
		records:        s,
		sweeper:        s,
		selfSweeping:   selfSweeping,
		explain:        func(err error) error { return explainDynamoDB(where, err) },
		close:          func() error { return nil },
	}, nil
}

// expiryAttr returns the expiry attribute of the store's options.
func expiryAttr(optFn func(*ddbstore.Options)) string {
	var o ddbstore.Options
	optFn(&o)
	return cmp.Or(o.ExpiryAttr, "expiration")
}

// ttlDeletes says why DynamoDB deletes the expired records of table
// itself: its time to live is enabled on the expiry attribute, and it is
// not a global table of strong consistency (strong), which has none. It
// returns "" when DynamoDB does not delete them, or when it cannot tell.
func ttlDeletes(ctx context.Context, e *env, client *awsdynamodb.Client, where, table, expiry string, strong bool) (string, error) {
	if strong {
		return "", nil
	}
	out, err := client.DescribeTimeToLive(ctx, &awsdynamodb.DescribeTimeToLiveInput{TableName: &table})
	var apiErr smithy.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "AccessDeniedException":
		e.note("%s: cannot tell whether DynamoDB deletes expired records by time to live (dynamodb:DescribeTimeToLive was denied): sweeping them", where)
		return "", nil
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnknownOperationException":
		return "", nil // a server without time to live
	case err != nil:
		return "", err
	}
	var status types.TimeToLiveStatus
	var attr string
	if d := out.TimeToLiveDescription; d != nil {
		status, attr = d.TimeToLiveStatus, aws.ToString(d.AttributeName)
	}
	if status != types.TimeToLiveStatusEnabled && status != types.TimeToLiveStatusEnabling {
		return "", nil
	}
	if attr != expiry {
		e.note("%s: time to live is on %q, not on the expiry attribute %q: if the function's store names its expiry %[2]q, give --expiry-attr %[2]s",
			where, attr, expiry)
		return "", nil
	}
	return fmt.Sprintf("DynamoDB deletes expired items itself, by time to live on the expiry attribute %q (%s), within days; "+
		"meanwhile the library treats them as absent", attr, status), nil
}

// explainDynamoDB adds the table to an error, and what it means when it
// is not the SDK's: an item that does not decode as a record, whose
// attributes are named otherwise or hold something else.
func explainDynamoDB(where string, err error) error {
	var opErr *smithy.OperationError
	if errors.As(err, &opErr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%s: %w; %s", where, err, attrHint)
}
