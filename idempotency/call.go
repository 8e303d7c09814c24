package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// A call is the state of one call of [Guard.Do] or of a wrapped function:
// its key, its outcome, and the observers that learn of it. Its store
// requests go through it, timed for the observers (EventStoreRequest).
type call struct {
	g   *Guard
	key string
	// outcome is how the call ended, once it has.
	outcome Outcome
	// obs and more are the call's observers: what the Guard's observers
	// (or, for the [CallObserver]s, what their BeginCall) returned. With
	// none, nothing of the call is timed nor reported.
	obs  Observer
	more []Observer
	// start is when the call began, for EventCallEnded, kept only when
	// someone observes.
	start time.Time
	ended bool
}

// begin starts the call c, and returns the context it goes on with.
func (c *call) begin(ctx context.Context, g *Guard) context.Context {
	c.g = g
	for _, o := range g.cfg.observers {
		if co, ok := o.(CallObserver); ok {
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

// setOutcome records how the call ended.
func (c *call) setOutcome(o Outcome) { c.outcome = o }

// finish returns the outcome of the call, which returns err: the one it
// settled on, or OutcomeCanceled when its context ended before it did.
func (c *call) finish(err error) Outcome {
	if c.outcome == "" && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		c.outcome = OutcomeCanceled
	}
	return c.outcome
}

// end reports the end of the call, which returns err.
func (c *call) end(ctx context.Context, err error) {
	c.finish(err)
	if !c.observed() || c.ended {
		return
	}
	c.ended = true
	c.report(ctx, Event{Kind: EventCallEnded, Key: c.key, Err: err, Start: c.start, Duration: time.Since(c.start), Outcome: c.outcome})
}

// observed reports whether someone observes the call.
func (c *call) observed() bool { return c.obs != nil }

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

// observe reports an event of kind about the call's key.
func (c *call) observe(ctx context.Context, kind EventKind, err error) {
	if c.observed() {
		c.report(ctx, Event{Kind: kind, Key: c.key, Err: err})
	}
}

// The store's requests, timed for the observers.

func (c *call) storePut(ctx context.Context, rec *persistence.Record, now time.Time) error {
	start := c.clock()
	err := c.g.store.Put(ctx, rec, now)
	c.request(ctx, "put", start, err)
	return err
}

func (c *call) storeGet(ctx context.Context) (*persistence.Record, error) {
	start := c.clock()
	rec, err := c.g.store.Get(ctx, c.key)
	c.request(ctx, "get", start, err)
	return rec, err
}

func (c *call) storeUpdate(ctx context.Context, rec *persistence.Record) error {
	start := c.clock()
	err := c.g.store.Update(ctx, rec)
	c.request(ctx, "update", start, err)
	return err
}

func (c *call) storeDelete(ctx context.Context, token string) error {
	start := c.clock()
	err := c.g.store.Delete(ctx, c.key, token)
	c.request(ctx, "delete", start, err)
	return err
}

func (c *call) storeCommit(ctx context.Context, rec *persistence.Record, writes []any) error {
	start := c.clock()
	err := c.g.store.(persistence.Committer).Commit(ctx, rec, writes)
	c.request(ctx, "commit", start, err)
	return err
}

func (c *call) storeCommitTx(ctx context.Context, tx persistence.Tx, rec *persistence.Record) error {
	start := c.clock()
	err := tx.Commit(ctx, rec)
	c.request(ctx, "commit", start, err)
	return err
}

// clock reads the time for an event, when someone observes.
func (c *call) clock() time.Time {
	if !c.observed() {
		return time.Time{}
	}
	return time.Now()
}

func (c *call) request(ctx context.Context, op string, start time.Time, err error) {
	if c.observed() {
		c.report(ctx, Event{Kind: EventStoreRequest, Key: c.key, Op: op, Err: err, Start: start, Duration: time.Since(start)})
	}
}
