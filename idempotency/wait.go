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
// second). Over a store that wakes waiters (persistence.Notifier), the
// leader watches its key and polls every pollWatched instead: the poll
// only covers a lost wake-up, so it can be rare (a wait of d makes about
// 2 + d/(3/4·pollWatched) requests).
const (
	waitMarginMax = time.Second
	pollFirst     = 10 * time.Millisecond
	pollMax       = 500 * time.Millisecond
	pollWatched   = 2 * time.Second
)

type waiter struct {
	start, end time.Time
	poll       time.Duration // the next poll's base delay
	waited     bool          // the call has waited
	// notifier is the store, when it wakes waiters. woken and stop are its
	// watch of the key, once started; unwatched is set when it failed.
	notifier  persistence.Notifier
	woken     <-chan *persistence.Record
	stop      func()
	unwatched bool
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
	return &waiter{start: now, end: end, poll: pollFirst, notifier: g.notifier}
}

// close ends the waiter's watch, if it has one.
func (w *waiter) close() {
	if w.stop != nil {
		w.stop()
	}
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

// pause waits before the next poll of the store for key. It returns the
// context's error, or ok false when the wait has run out.
//
// Over a store that wakes waiters, the first pause starts the watch and
// returns at once: the record is then read after the watch began, so that
// no outcome can fall between the read and the watch. Later pauses end at
// a wake-up, or after pollWatched. A wake-up may carry the completed
// record (told), which the caller may answer from instead of the poll.
func (w *waiter) pause(ctx context.Context, key string) (told *persistence.Record, ok bool, err error) {
	w.waited = true
	left := time.Until(w.end)
	if left <= 0 {
		return nil, false, nil
	}
	if w.notifier != nil && w.woken == nil && !w.unwatched {
		// A watch may need a connection: it gets a poll's time at most.
		wctx, cancel := context.WithTimeout(ctx, min(left, pollWatched))
		woken, stop, err := w.notifier.Watch(wctx, key)
		cancel()
		if err == nil {
			w.woken, w.stop, w.poll = woken, stop, pollWatched
			return nil, true, nil
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		w.unwatched = true // poll as over a store without wake-ups
		if left = time.Until(w.end); left <= 0 {
			return nil, false, nil
		}
	}
	d := w.poll - rand.N(w.poll/4+1) // jitter: [3/4 poll, poll]
	if w.woken == nil {
		w.poll = min(2*w.poll, pollMax)
	}
	t := time.NewTimer(min(d, left))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-t.C:
		return nil, true, nil
	case told = <-w.woken: // nil without a watch
		return told, true, nil
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
