package idempotency

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// Calls with one key in one process share one reservation: the first
// (the leader of the key's flight) goes to the store; the others follow
// it in memory, and learn its outcome without a store request of their
// own: the completed record, or nothing, when the leader released the key
// or could not reserve it (they then try again themselves). A flight lives
// only while its leader's call does, so the registry holds no more
// entries than calls in progress.
//
// Flights are kept per store and key: several Guards over one store (two
// wrapped functions with one prefix) share them; the same key in two
// stores does not.

type flightKey struct {
	store any // the store, or the Guard when the store's type is not comparable
	key   string
}

// A flight is one leader's call with a key.
type flight struct {
	payloadHash string
	done        chan struct{} // closed when the leader's call ends

	mu    sync.Mutex
	until time.Time // when the reservation that holds the key lapses, once known
	// outcome is the completed record the leader ended with, or nil;
	// written before done is closed.
	outcome *persistence.Record
}

var flights struct {
	mu sync.Mutex
	m  map[flightKey]*flight
}

// flightIdentity returns what flights of g's store are kept under.
func flightIdentity(g *Guard) any {
	if t := reflect.TypeOf(g.store); t != nil && t.Comparable() {
		return g.store
	}
	return g
}

// join returns the flight of key, and whether the caller leads it (a new
// flight). A caller does not follow a flight, and goes to the store without
// one (nil, true), when its payload differs from the leader's (the stored
// record, not the leader's call, decides a mismatch), or when the
// reservation the leader holds has lapsed (a call running past its
// deadline, or whose renewals failed, may be taken over, as from another
// process).
func (g *Guard) join(key, payloadHash string) (f *flight, leader bool) {
	k := flightKey{g.flightID, key}
	flights.mu.Lock()
	defer flights.mu.Unlock()
	if f := flights.m[k]; f != nil {
		if until := f.lapses(); f.payloadHash == payloadHash && (until.IsZero() || !until.Before(time.Now())) {
			return f, false
		}
		return nil, true
	}
	if flights.m == nil {
		flights.m = make(map[flightKey]*flight)
	}
	f = &flight{payloadHash: payloadHash, done: make(chan struct{})}
	flights.m[k] = f
	return f, true
}

// land ends the leader's flight with outcome (a completed record, or nil)
// and wakes its followers. f may be nil (a caller that did not join).
func (g *Guard) land(key string, f *flight, outcome *persistence.Record) {
	if f == nil {
		return
	}
	flights.mu.Lock()
	if k := (flightKey{g.flightID, key}); flights.m[k] == f {
		delete(flights.m, k)
	}
	flights.mu.Unlock()
	f.mu.Lock()
	f.outcome = outcome
	f.mu.Unlock()
	close(f.done)
}

// setUntil records when the reservation that holds the key lapses. f may
// be nil.
func (f *flight) setUntil(t time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.until = t
	f.mu.Unlock()
}

// lapses returns when the reservation that holds the key lapses; zero
// while the leader has not reserved it.
func (f *flight) lapses() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until
}

func (f *flight) result() *persistence.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcome
}

// Waiting (WithWait). A waiter waits until its end: the wait's maximum
// after it started, but never past its context's deadline less a margin
// (a tenth of the time the context had left, at most waitMarginMax), so
// that it still has time to answer. Followers wait for their flight to
// land; a leader whose key another process holds polls the store, with
// exponential backoff from pollFirst to pollMax and jitter: a wait of d
// makes at most about log2(pollMax/pollFirst) + d/(3/4·pollMax) requests
// (6, and then 3 a second).
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

// follow waits for f to land. It returns the leader's outcome (nil: try
// the store), or the context's error, or ok false when the wait ran out.
func (w *waiter) follow(ctx context.Context, f *flight) (outcome *persistence.Record, ok bool, err error) {
	t := time.NewTimer(time.Until(w.end))
	defer t.Stop()
	select {
	case <-f.done:
		w.waited = true
		return f.result(), true, nil
	case <-ctx.Done():
		w.waited = true
		return nil, false, ctx.Err()
	case <-t.C:
		w.waited = true
		return nil, false, nil
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
func (c *call) reportWait(ctx context.Context, w *waiter, key string, err error) {
	if w != nil && w.waited {
		var ipe *InProgressError
		if errors.As(err, &ipe) {
			err = ErrInProgress
		}
		c.report(ctx, Event{Kind: EventWaited, Key: key, Err: err, Start: w.start, Duration: time.Since(w.start)})
	}
}
