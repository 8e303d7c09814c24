package idempotency

import (
	"context"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// Calls with one key in one process share one reservation: the first
// (the leader of the key's flight) goes to the store; the others follow
// it in memory, and learn its answer without a store request of their
// own (docs/protocol.md, In-process sharing): the completed record it
// found or stored; that the key is reserved, by the leader or by another
// process, until a time; or nothing, when the leader released the key or
// its store request failed (followers then try the store themselves). A
// flight lives only while its leader's call does, so the registry holds
// no more entries than calls in progress.
//
// A flight is as good as its reservation: once that lapses (the leader
// ran past its deadline), a call that arrives leads a new flight in its
// place and goes to the store, where it may take the key over, and the
// followers of the lapsed flight wake and follow the new one.
//
// A Guard keeps the flights of its keys (flights): two Guards over one
// store (two wrapped functions with one prefix) share no flights, and
// their calls with one key meet in the store.

// A flight is one leader's call with a key.
type flight struct {
	payloadHash string
	answered    chan struct{} // closed once the leader knows who holds the key, or has landed
	done        chan struct{} // closed when the leader's call ends

	mu           sync.Mutex
	answeredOnce bool
	until        time.Time // when the reservation that holds the key lapses, once known
	// outcome is the completed record the leader ended with, or nil;
	// written before done is closed.
	outcome *persistence.Record
	// heldSince is set when the leader found the key held until an
	// operator releases it (WithHoldUntilReleased): when its reservation
	// lapsed.
	heldSince time.Time
}

// flights are the flights of a Guard's keys, the leaders' calls in
// progress. The zero value is ready to use.
type flights struct {
	mu sync.Mutex // guards m
	m  map[string]*flight
}

// join returns the flight of key, and whether the caller leads it (a new
// flight). A caller whose payload differs from the leader's does not
// follow, and goes to the store without a flight (nil, true): the stored
// record, not the leader's call, decides a mismatch. A flight whose
// reservation has lapsed is replaced by a new one that the caller leads.
func (fs *flights) join(key, payloadHash string) (f *flight, leader bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[key]; f != nil {
		if f.payloadHash != payloadHash {
			return nil, true
		}
		if !f.lapsed(time.Now()) {
			return f, false
		}
	}
	if fs.m == nil {
		fs.m = make(map[string]*flight)
	}
	f = &flight{payloadHash: payloadHash, answered: make(chan struct{}), done: make(chan struct{})}
	fs.m[key] = f
	return f, true
}

// land ends the leader's flight and wakes its followers, with the answer
// it ended with: outcome, the completed record it found or stored, or
// reservedUntil, when another process has reserved the key until then, or
// neither (the leader released the key, or its store request failed). f
// may be nil (a caller that did not join).
func (fs *flights) land(key string, f *flight, outcome *persistence.Record, reservedUntil time.Time) {
	if f == nil {
		return
	}
	fs.mu.Lock()
	if fs.m[key] == f {
		delete(fs.m, key)
	}
	fs.mu.Unlock()
	f.mu.Lock()
	f.outcome, f.until = outcome, reservedUntil
	f.mu.Unlock()
	// done first: a follower that sees answered closed by the landing
	// must see the landing.
	close(f.done)
	f.mu.Lock()
	if !f.answeredOnce {
		f.answeredOnce = true
		close(f.answered)
	}
	f.mu.Unlock()
}

// reserved records that the key is reserved, by the leader or another
// process, until t: followers without WithWait are answered with
// *InProgressError from then on. f may be nil.
func (f *flight) reserved(t time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.until = t
	if !f.answeredOnce {
		f.answeredOnce = true
		close(f.answered)
	}
	f.mu.Unlock()
}

// landHeld records, before the leader lands, that the key is held until
// an operator releases it, since the reservation that holds it lapsed at
// since: followers are refused so, without a store request. f may be
// nil.
func (f *flight) landHeld(since time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.heldSince = since
	f.mu.Unlock()
}

// operatorHeld returns when the reservation that the leader found held
// lapsed, once the leader has landed; zero otherwise.
func (f *flight) operatorHeld() time.Time {
	if !f.landed() {
		return time.Time{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heldSince
}

// lapses returns when the reservation that holds the key lapses; zero
// while the leader does not know.
func (f *flight) lapses() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until
}

// lapsed reports whether the reservation that holds the key has lapsed
// at now.
func (f *flight) lapsed(now time.Time) bool {
	until := f.lapses()
	return !until.IsZero() && until.Before(now)
}

func (f *flight) result() *persistence.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcome
}

// landed reports whether the leader's call has ended.
func (f *flight) landed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// await waits, without WithWait, for the leader's answer: it returns the
// leader's outcome once the leader has landed (nil: try the store), or
// reserved true once the key is known to be reserved, or the context's
// error.
func (f *flight) await(ctx context.Context) (outcome *persistence.Record, reserved bool, err error) {
	select {
	case <-f.answered:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	if f.landed() {
		if outcome := f.result(); outcome != nil {
			return outcome, false, nil
		}
		// Held by another process, or released, or failed.
		return nil, !f.lapses().IsZero() && !f.lapsed(time.Now()), nil
	}
	return nil, true, nil
}
