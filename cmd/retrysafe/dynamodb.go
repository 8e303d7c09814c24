package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
			o.StaticPKValue = ddbstore.StaticPKPrefix + f.pkFnName
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
	if err := ddbstore.CheckTable(ctx, client, table, optFn); err != nil {
		if t := timedOut(ctx, where, err, f.requestTimeout, f.timeout); t != nil {
			return nil, t
		}
		var (
			missing *types.ResourceNotFoundException
			apiErr  smithy.APIError
		)
		switch {
		case errors.As(err, &missing):
			return nil, fmt.Errorf("%s does not exist: check --table, --region and --profile", where)
		case errors.As(err, &apiErr) && apiErr.ErrorCode() == "AccessDeniedException":
			// The check is a courtesy: an operator allowed to read the
			// records but not to describe the table goes on without it.
		case errors.Is(err, ddbstore.ErrGlobalTable):
			// A global table that the flags do not describe: that is the
			// function's choice to state (Options.GlobalTable). The
			// command reserves nothing and commits nothing, and its
			// deletes are conditioned on the record it read.
		case errors.Is(err, ddbstore.ErrKeySchema):
			return nil, fmt.Errorf("%s: %w; give the key attributes of the function's store (--key-attr, --sort-key-attr)", where, err)
		default:
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return &store{
		kind:           "DynamoDB",
		name:           where,
		requestTimeout: f.requestTimeout,
		timeout:        f.timeout,
		records:        s,
		explain:        func(err error) error { return explainDynamoDB(where, err) },
		close:          func() error { return nil },
	}, nil
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
