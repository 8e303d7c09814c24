package idempotency

import (
	"context"
	"sync"
	"time"
)

// writeContext is the context of a completion or release write: the
// invocation's values without its cancellation, and a deadline of its own,
// like context.WithTimeout(context.WithoutCancel(ctx), d). It starts its
// timer only when something asks for Done: a store that only checks Err or
// reads the deadline (the memory store; go-redis, which sets socket
// deadlines from it) needs none, and starting and stopping a timer cost
// more than a memory store's whole write.
type writeContext struct {
	values   context.Context // for Value only
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first call to Done
	timer *time.Timer
	err   error
}

// newWriteContext returns a writeContext with ctx's values and deadline.
func newWriteContext(ctx context.Context, deadline time.Time) *writeContext {
	return &writeContext{values: ctx, deadline: deadline}
}

// cancel ends the context, as a context.CancelFunc does, and stops its
// timer.
func (c *writeContext) cancel() { c.end(context.Canceled) }

// Deadline implements context.Context.
func (c *writeContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Value implements context.Context.
func (c *writeContext) Value(key any) any { return c.values.Value(key) }

// Done implements context.Context. The channel is closed at the deadline
// or when the context is cancelled, whichever comes first.
func (c *writeContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		c.expireLocked()
		if c.err != nil {
			close(c.done)
		} else {
			c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
		}
	}
	return c.done
}

// Err implements context.Context.
func (c *writeContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.expireLocked()
		if c.err != nil && c.done != nil {
			// The timer has not fired yet: Done must be closed once Err
			// is not nil.
			close(c.done)
			c.timer.Stop()
		}
	}
	return c.err
}

// expireLocked sets err if the deadline has passed. Given a deadline from
// time.Now, time.Until reads only the monotonic clock, at half the cost of
// time.Now.
func (c *writeContext) expireLocked() {
	if c.err == nil && time.Until(c.deadline) <= 0 {
		c.err = context.DeadlineExceeded
	}
}

// end ends the context with err, unless it has ended already.
func (c *writeContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
		c.timer.Stop()
	}
}
