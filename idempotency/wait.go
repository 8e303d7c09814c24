package idempotency

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// Waiting (WithWait). A waiter waits until its end: the wait's maximum
// after it started, but never past its context's deadline less a margin
// (a tenth of the time the context had left, at most waitMarginMax), so
// that it still has time to answer. Followers wait for their flight to
// land, or for its reservation to lapse; a leader whose key another
// process holds polls the store, with exponential backoff from pollFirst
// to pollMax and jitter: a wait of d makes at most about
// log2(pollMax/pollFirst) + d/(3/4·pollMax) requests (6, and then 8/3 a
// second).
const (
	waitMarginMax = time.Second
	pollFirst     = 10 * time.Millisecond
	pollMax       = 500 * time.Millisecond
)

type waiter struct {
	start, end time.Time
	poll       time.Duration // the next poll's base delay
	waited     bool          // the call has waited
}

// newWaiter returns the waiter of a call, or nil without WithWait.
func (g *Guard) newWaiter(ctx context.Context) *waiter {
	if g.cfg.wait <= 0 {
		return nil
	}
	now := time.Now()
	end := now.Add(g.cfg.wait)
	if deadline, ok := ctx.Deadline(); ok {
		margin := min(deadline.Sub(now)/10, waitMarginMax)
		if d := deadline.Add(-margin); d.Before(end) {
			end = d
		}
	}
	return &waiter{start: now, end: end, poll: pollFirst}
}

// follow waits for f to land, or for the reservation that holds the key
// to lapse. It returns the leader's outcome (nil: try again, through the
// flight registry and the store), or the context's error, or ok false
// when the wait ran out.
func (w *waiter) follow(ctx context.Context, f *flight) (outcome *persistence.Record, ok bool, err error) {
	w.waited = true
	answered := f.answered
	for {
		end := w.end
		if until := f.lapses(); !until.IsZero() && until.Before(end) {
			end = until.Add(time.Millisecond) // just past it: lapsed means before now
		}
		t := time.NewTimer(time.Until(end))
		select {
		case <-f.done:
			t.Stop()
			return f.result(), true, nil
		case <-answered:
			// The reservation's lapse is known from now on.
			t.Stop()
			answered = nil
			continue
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C:
		}
		switch now := time.Now(); {
		case f.lapsed(now):
			return nil, true, nil // the flight no longer holds the key
		case !now.Before(w.end):
			return nil, false, nil
		}
		// A renewal moved the lapse: wait on.
	}
}

// pause sleeps before the next poll of the store. It returns the context's
// error, or ok false when the wait has run out.
func (w *waiter) pause(ctx context.Context) (ok bool, err error) {
	w.waited = true
	d := w.poll - rand.N(w.poll/4+1) // jitter: [3/4 poll, poll]
	w.poll = min(2*w.poll, pollMax)
	left := time.Until(w.end)
	if left <= 0 {
		return false, nil
	}
	d = min(d, left)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return true, nil
	}
}

// reportWait reports the end of a call's wait, if it waited: it ended
// with err (nil when the call got an outcome or the key).
func (c *call) reportWait(ctx context.Context, w *waiter, err error) {
	if w != nil && w.waited {
		var ipe *InProgressError
		if errors.As(err, &ipe) {
			err = ErrInProgress
		}
		c.report(ctx, Event{Kind: EventWaited, Key: c.key, Err: err, Start: w.start, Duration: time.Since(w.start)})
	}
}
