package idempotency

import (
	"context"
	"reflect"
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
// Flights are kept per store and key: several Guards over one store (two
// wrapped functions with one prefix) share them; the same key in two
// stores does not, nor in two Guards over a store that is not a pointer.

type flightKey struct {
	store uintptr // the store's address, or the Guard's (see flightIdentity)
	key   string
}

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

var flights struct {
	mu sync.Mutex
	m  map[flightKey]*flight
}

// flightIdentity returns what flights of g's store are kept under: the
// store's address when it is a pointer, as stores are, and otherwise the
// Guard's, whose keys then share flights with no other Guard's. An
// address rather than the store itself: a map key holding an interface
// costs a hash through the interface's type on every lookup, and on an
// empty map (a process's usual state between calls) a walk of the key's
// type, about a microsecond a call. Either object lives as long as the
// Guard, and so as long as any flight under its address.
func flightIdentity(g *Guard) uintptr {
	if v := reflect.ValueOf(g.store); v.Kind() == reflect.Pointer {
		return v.Pointer()
	}
	return reflect.ValueOf(g).Pointer()
}

// join returns the flight of key, and whether the caller leads it (a new
// flight). A caller whose payload differs from the leader's does not
// follow, and goes to the store without a flight (nil, true): the stored
// record, not the leader's call, decides a mismatch. A flight whose
// reservation has lapsed is replaced by a new one that the caller leads.
func (g *Guard) join(key, payloadHash string) (f *flight, leader bool) {
	k := flightKey{g.flightID, key}
	flights.mu.Lock()
	defer flights.mu.Unlock()
	if f := flights.m[k]; f != nil {
		if f.payloadHash != payloadHash {
			return nil, true
		}
		if !f.lapsed(time.Now()) {
			return f, false
		}
	}
	if flights.m == nil {
		flights.m = make(map[flightKey]*flight)
	}
	f = &flight{payloadHash: payloadHash, answered: make(chan struct{}), done: make(chan struct{})}
	flights.m[k] = f
	return f, true
}

// land ends the leader's flight and wakes its followers, with the answer
// it ended with: outcome, the completed record it found or stored, or
// reservedUntil, when another process has reserved the key until then, or
// neither (the leader released the key, or its store request failed). f
// may be nil (a caller that did not join).
func (g *Guard) land(key string, f *flight, outcome *persistence.Record, reservedUntil time.Time) {
	if f == nil {
		return
	}
	flights.mu.Lock()
	if k := (flightKey{g.flightID, key}); flights.m[k] == f {
		delete(flights.m, k)
	}
	flights.mu.Unlock()
	f.mu.Lock()
	f.outcome, f.until = outcome, reservedUntil
	f.mu.Unlock()
	// done first: a follower that sees answered closed by the landing
	// must see the landing.
	close(f.done)
	f.mu.Lock()
	f.answer()
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
	f.answer()
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

// answer closes f.answered, once. f.mu must be held.
func (f *flight) answer() {
	if !f.answeredOnce {
		f.answeredOnce = true
		close(f.answered)
	}
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
