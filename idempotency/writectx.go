package idempotency

import (
	"context"
	"sync/atomic"
	"time"
)

// The settling writes (complete, record an error, release, commit, renew)
// run without the call's cancellation, within the final write timeout
// (WithFinalWriteTimeout). A context.WithTimeout per write would arm a
// runtime timer per write, and a timer earlier than every other one
// wakes the thread that waits for the network, to wait again with the
// new timeout: on a call that sends its completion over the network,
// that costs more CPU than the rest of the library's work on it
// (BenchmarkFinalContext; about 15 µs of a first call's 800 on DynamoDB
// Local). So the writes of a Guard share their deadlines: a write gets
// the current shared one if it is at least the timeout away, or makes a
// new one, an eighth of the timeout later than it needs. A write's
// deadline is then between the timeout and nine eighths of it from its
// start, and the Guard arms at most one timer per eighth of a timeout.

// writeDeadlines are the shared deadlines of a Guard's settling writes.
type writeDeadlines struct {
	timeout time.Duration
	current atomic.Pointer[writeDeadline]
}

// A writeDeadline is a deadline shared by settling writes: ctx ends at
// at, and nothing cancels it sooner.
type writeDeadline struct {
	at     time.Time
	ctx    context.Context
	cancel context.CancelFunc // called only on one no write got: others share ctx
}

// bubbleClock is when the clock of a testing/synctest bubble stands
// before a test has spent years of its fake time: its clock starts at
// midnight UTC on 2000-01-01.
var bubbleClock = time.Date(2010, time.January, 1, 0, 0, 0, 0, time.UTC)

// context returns the context of a settling write that starts now, and
// the function that releases it: it has parent's values but not its
// cancellation, and a deadline at least the timeout away.
//
// A clock before 2010 is a synctest bubble's (a machine's is not), and
// there each write gets a timer of its own, as before: a context made in
// one bubble must not be used in another, nor outside, and one Guard may
// serve the tests of several bubbles.
func (d *writeDeadlines) context(parent context.Context, now time.Time) (context.Context, context.CancelFunc) {
	if now.Before(bubbleClock) {
		return context.WithDeadline(context.WithoutCancel(parent), now.Add(d.timeout))
	}
	need := now.Add(d.timeout)
	var next *writeDeadline
	for {
		cur := d.current.Load()
		if cur != nil && !cur.at.Before(need) {
			if next != nil {
				next.cancel() // another write stored one far enough first
			}
			return writeContext{parent: parent, shared: cur.ctx}, func() {}
		}
		if next == nil {
			at := need.Add(d.timeout / 8)
			ctx, cancel := context.WithDeadline(context.Background(), at)
			next = &writeDeadline{at: at, ctx: ctx, cancel: cancel}
		}
		// Deadlines only move later: cur's is before need, next's after.
		if d.current.CompareAndSwap(cur, next) {
			return writeContext{parent: parent, shared: next.ctx}, func() {}
		}
	}
}

// writeContext is a settling write's context: the values of the call's
// context, parent, and the deadline, Done channel and error of a shared
// deadline's context, shared, and nothing of parent's cancellation.
type writeContext struct {
	parent context.Context
	shared context.Context
}

func (c writeContext) Deadline() (time.Time, bool) { return c.shared.Deadline() }
func (c writeContext) Done() <-chan struct{}       { return c.shared.Done() }
func (c writeContext) Err() error                  { return c.shared.Err() }

// Value asks shared first, then parent. shared has no values of its own:
// what it answers is the context package's own lookup of the context a
// derived one registers with, and context.Cause's. A context derived from
// c, directly or through other contexts' values (as the SDK and net/http
// derive theirs for each request), then registers with the shared
// deadline instead of starting a goroutine to watch Done, and Cause is
// shared's, never parent's.
func (c writeContext) Value(key any) any {
	if v := c.shared.Value(key); v != nil {
		return v
	}
	return c.parent.Value(key)
}
