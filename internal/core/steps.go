package core

import "context"

// stepsOff marks the context of a function that runs without the
// library: its steps only run.
type stepsOff struct{}

// WithoutSteps returns ctx for a function that runs without the library
// (it is off, or the request has no key), so that its steps only run.
func WithoutSteps(ctx context.Context) context.Context {
	return context.WithValue(ctx, stepsOff{}, true)
}

// StepsOff reports whether ctx is that of a function that runs without
// the library.
func StepsOff(ctx context.Context) bool { return ctx.Value(stepsOff{}) != nil }
