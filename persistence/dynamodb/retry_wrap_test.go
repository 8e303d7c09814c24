package dynamodb_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// valueRetryer is a retryer of a type that is not comparable (it holds a
// slice), which the wrappers' cache must not compare.
type valueRetryer struct {
	aws.Retryer
	_ []int
}

// The option of the store's writes wraps the client's retryer once, and
// hands every request of that client the same wrapper, which retries
// ReplicatedWriteConflictException and answers other errors as the
// client's retryer does; a request of another client gets a wrapper of
// that client's retryer (one kept at a time), and a retryer whose type is not comparable is
// wrapped for each request, without a panic.
func TestRetryConflictsWrapsEachRetryer(t *testing.T) {
	wrap := func(r aws.Retryer) aws.Retryer {
		o := awsdynamodb.Options{Retryer: r}
		dynamodb.RetryConflicts(&o)
		return o.Retryer
	}
	conflict := &types.ReplicatedWriteConflictException{}
	conditional := &types.ConditionalCheckFailedException{}

	a, b := retry.NewStandard(), retry.NewStandard()
	wa := wrap(a)
	require.Same(t, wa, wrap(a), "one wrapper for the requests of a client")
	require.True(t, wa.IsErrorRetryable(conflict))
	require.False(t, wa.IsErrorRetryable(conditional))
	require.Equal(t, a.MaxAttempts(), wa.MaxAttempts())

	wb := wrap(b)
	require.NotSame(t, wa, wb)
	require.True(t, wb.IsErrorRetryable(conflict))
	require.Same(t, wb, wrap(b))
	wa = wrap(a) // a's requests again, after b's: a wrapper of a
	require.True(t, wa.IsErrorRetryable(conflict))
	require.Same(t, wa, wrap(a))

	v := valueRetryer{Retryer: retry.NewStandard()}
	require.NotPanics(t, func() {
		wv := wrap(v)
		require.True(t, wv.IsErrorRetryable(conflict))
		require.True(t, wrap(v).IsErrorRetryable(errors.Join(conflict)))
	})
	require.True(t, wrap(a).IsErrorRetryable(conflict))

	o := awsdynamodb.Options{}
	dynamodb.RetryConflicts(&o)
	require.Nil(t, o.Retryer, "no retryer, none added")
}

// The store's retryer answers two errors itself, wherever they sit in the
// error's tree, and hands every other one to the client's retryer: a failed
// condition is the answer a conditional write asks for, never retried, even
// by a retryer that retries everything; a replicated write conflict is
// retried, even by one that retries nothing.
func TestStoreRetryerAnswersItsOwnErrors(t *testing.T) {
	wrap := func(r aws.Retryer) aws.Retryer {
		o := awsdynamodb.Options{Retryer: r}
		dynamodb.RetryConflicts(&o)
		return o.Retryer
	}
	all := wrap(retryEverything{retry.NewStandard()})
	none := wrap(aws.NopRetryer{})
	conditional := sdkError(&types.ConditionalCheckFailedException{})
	conflict := sdkError(&types.ReplicatedWriteConflictException{})
	throttled := sdkError(&types.ProvisionedThroughputExceededException{})

	require.False(t, all.IsErrorRetryable(conditional))
	require.False(t, all.IsErrorRetryable(errors.Join(errors.New("other"), conditional)))
	require.True(t, all.IsErrorRetryable(throttled), "the client's retryer decides")
	require.True(t, all.IsErrorRetryable(errors.New("no code")), "the client's retryer decides")
	require.True(t, none.IsErrorRetryable(conflict))
	require.False(t, none.IsErrorRetryable(throttled), "the client's retryer decides")
	standard := wrap(retry.NewStandard())
	require.True(t, standard.IsErrorRetryable(throttled))
	require.False(t, standard.IsErrorRetryable(conditional))

	// A retryer without attempt tokens of its own (aws.Retryer only) gets
	// its initial token for each attempt, as the SDK's wrappers give it.
	v1 := wrap(valueRetryer{Retryer: retry.NewStandard()})
	v2, ok := v1.(aws.RetryerV2)
	require.True(t, ok, "the wrapper is an aws.RetryerV2")
	release, err := v2.GetAttemptToken(t.Context())
	require.NoError(t, err)
	require.NoError(t, release(nil))
	require.False(t, v1.IsErrorRetryable(conditional))
}

// sdkError wraps err as the SDK's middleware does before its retryer sees
// it: in the HTTP response errors of smithy and of the SDK.
func sdkError(err error) error {
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusBadRequest}}
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: resp, Err: err}, RequestID: "r"}
}

// errorCode finds the code that errors.As finds with an interface{
// ErrorCode() string } target, in every shape of error tree.
func TestErrorCodeIsErrorsAs(t *testing.T) {
	conditional := &types.ConditionalCheckFailedException{}
	conflict := &types.ReplicatedWriteConflictException{}
	cases := []error{
		nil,
		errors.New("plain"),
		conditional,
		sdkError(conditional),
		&smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: sdkError(conflict)},
		fmt.Errorf("wrapped: %w", sdkError(conditional)),
		errors.Join(errors.New("first"), sdkError(conflict), conditional),
		errors.Join(errors.New("first"), errors.New("second")),
		fmt.Errorf("two: %w, %w", errors.New("no code"), errors.Join(errors.New("x"), conflict)),
		&smithy.GenericAPIError{Code: "Throttling"},
		&retry.MaxAttemptsError{Attempt: 3, Err: sdkError(conflict)},
	}
	for _, err := range cases {
		var coded interface{ ErrorCode() string }
		want := ""
		if errors.As(err, &coded) {
			want = coded.ErrorCode()
		}
		require.Equal(t, want, dynamodb.ErrorCode(err), "%v", err)
	}
}
