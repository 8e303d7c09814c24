// Package sdkconfig loads the AWS SDK configuration of the examples, set
// for many concurrent invocations in one process, as Lambda Managed
// Instances run them (AWS_LAMBDA_MAX_CONCURRENCY), or a batch with
// parallel records.
package sdkconfig

import (
	"context"
	"net/http"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Load returns the SDK's default configuration (the environment,
// AWS_ENDPOINT_URL_DYNAMODB included), with two changes for concurrent
// calls that share one client:
//
//   - no client-side retry quota: the standard retryer's token bucket
//     (500 tokens, 5 a retry) is shared by every call of the client, and a
//     burst of retries under fan-out drains it, after which calls fail with
//     "retry quota exceeded" without reaching DynamoDB
//     (aws/aws-sdk-go-v2#1665). Retries still back off, with jitter, and
//     stop after 3 attempts;
//   - as many idle connections kept per host as calls run at once
//     (concurrency, at least the SDK's default of 10), so that a burst does
//     not open and close connections.
func Load(ctx context.Context, concurrency int) (aws.Config, error) {
	return config.LoadDefaultConfig(ctx,
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
		}),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = max(concurrency, t.MaxIdleConnsPerHost)
		})),
	)
}

// Concurrency returns how many invocations the process runs at once: the
// value of AWS_LAMBDA_MAX_CONCURRENCY (set by Lambda Managed Instances),
// or 1.
func Concurrency() int {
	if n, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_MAX_CONCURRENCY")); err == nil && n > 0 {
		return n
	}
	return 1
}
