package idempotency

import (
	"context"
	"errors"
	"time"
)

// A call is the state of one call of [Guard.Do] or of a wrapped function:
// its key, and the observers that learn of it. With no observer nothing
// of the call is timed nor reported.
type call struct {
	g   *Guard
	key string
	// obs and more are the call's observers: the Guard's observers, or
	// what their BeginCall returned.
	obs  Observer
	more []Observer
	// start is when the call began, kept only when someone observes.
	start time.Time
	ended bool
}

// begin starts the call c, and returns the context it goes on with.
func (c *call) begin(ctx context.Context, g *Guard) context.Context {
	c.g = g
	for _, o := range g.cfg.observers {
		if co, ok := o.(callObserver); ok {
			ctx, o = co.BeginCall(ctx, Call{Prefix: g.prefix, Store: g.storeName, System: g.storeSystem})
			if o == nil {
				continue
			}
		}
		if c.obs == nil {
			c.obs = o
		} else {
			c.more = append(c.more, o)
		}
	}
	if c.obs != nil {
		c.start = time.Now()
	}
	return ctx
}

// end reports the end of the call, which returns err with outcome: the
// one the call settled on, or OutcomeCanceled when its context ended
// before it settled on one. It returns the outcome.
func (c *call) end(ctx context.Context, outcome Outcome, err error) Outcome {
	if outcome == "" && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		outcome = OutcomeCanceled
	}
	if c.obs != nil && !c.ended {
		c.ended = true
		c.report(ctx, Event{Kind: EventCallEnded, Key: c.key, Err: err, Start: c.start, Duration: time.Since(c.start), Outcome: outcome})
	}
	return outcome
}

// report gives e to the call's observers.
func (c *call) report(ctx context.Context, e Event) {
	if c.obs == nil {
		return
	}
	c.obs.Observe(ctx, e)
	for _, o := range c.more {
		o.Observe(ctx, e)
	}
}

// now reads the clock for an event, when someone observes.
func (c *call) now() time.Time {
	if c.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

// stored reports a store request op that began at start and ended with
// err, when someone observes.
func (c *call) stored(ctx context.Context, op string, start time.Time, err error) {
	if c.obs != nil {
		c.report(ctx, Event{Kind: EventStoreRequest, Key: c.key, Op: op, Err: err, Start: start, Duration: time.Since(start)})
	}
}
