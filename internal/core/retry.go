package core

import "context"

type likelyRetryKey struct{}

// WithLikelyRetry marks ctx as the context of a call that is likely a
// retry of one that ran, as a trigger says (an SQS message received again).
// The Guard then reads the record before it writes. A read of a completed
// record costs a read unit per 4 KB, where the write that fails on it
// costs a write unit per KB. The function's own calls inherit the mark:
// in a retry they likely ran too.
func WithLikelyRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, likelyRetryKey{}, true)
}

// LikelyRetry reports whether ctx was marked by WithLikelyRetry.
func LikelyRetry(ctx context.Context) bool {
	v, _ := ctx.Value(likelyRetryKey{}).(bool)
	return v
}
