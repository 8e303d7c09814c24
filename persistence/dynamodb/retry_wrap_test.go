package dynamodb_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
