// Package wake keeps the watches of the stores that wake waiting calls
// (persistence.Notifier): the channels of their watches, by key, and the
// pause of a connection that listens for wake-ups before it tries again.
package wake

import (
	"context"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// Set is a store's watches, by key. The zero value is ready to use. It is
// not safe for concurrent use: its store's lock guards it, so that a
// watch and the subscription it needs change together.
type Set struct {
	byKey map[string]map[chan *persistence.Record]struct{}
}

// Add adds a watch of key, and returns its channel, and whether it is the
// key's only watch.
func (s *Set) Add(key string) (ch chan *persistence.Record, first bool) {
	if s.byKey == nil {
		s.byKey = make(map[string]map[chan *persistence.Record]struct{})
	}
	chans := s.byKey[key]
	if chans == nil {
		chans = make(map[chan *persistence.Record]struct{})
		s.byKey[key] = chans
	}
	ch = make(chan *persistence.Record, 1)
	chans[ch] = struct{}{}
	return ch, len(chans) == 1
}

// Remove removes the watch of key whose channel is ch, and reports
// whether it was the key's last.
func (s *Set) Remove(key string, ch chan *persistence.Record) (last bool) {
	chans := s.byKey[key]
	delete(chans, ch)
	if len(chans) > 0 {
		return false
	}
	delete(s.byKey, key)
	return true
}

// Keys returns the number of keys watched.
func (s *Set) Keys() int { return len(s.byKey) }

// Wake wakes the watches of key with rec, a completed record or nil,
// without blocking. Each watch gets a copy of rec. A wake-up that finds
// one pending replaces it with nil: the waiter reads the record then.
func (s *Set) Wake(key string, rec *persistence.Record) {
	for ch := range s.byKey[key] {
		var v *persistence.Record
		if rec != nil {
			c := *rec
			v = &c
		}
		select {
		case ch <- v:
			continue
		default:
		}
		// Only the store's lock holder sends, so after the drain there is room.
		select {
		case <-ch:
		default:
		}
		select {
		case ch <- nil:
		default:
		}
	}
}

// WakeAll wakes every watch with nil, as after a connection that listens
// for wake-ups dropped: one may have been lost.
func (s *Set) WakeAll() {
	for key := range s.byKey {
		s.Wake(key, nil)
	}
}

// Linger is how long a store keeps its listening connection open after
// its last watch ended: a process that waits now and then keeps one
// connection, rather than opening one for each wait.
const Linger = 30 * time.Second

// Ready waits until ready is closed (the store watches), and returns nil;
// when ctx ends first, it calls stop and returns ctx's error.
func Ready(ctx context.Context, ready <-chan struct{}, stop func()) error {
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}

// Backoff is the pause of a listening connection before it tries again
// after a failure: from 10 milliseconds, doubling, to a second. The zero
// value is ready to use.
type Backoff struct {
	d time.Duration
}

// Pause waits for the next pause, and reports false when done is closed
// first.
func (b *Backoff) Pause(done <-chan struct{}) bool {
	b.d = min(max(2*b.d, 10*time.Millisecond), time.Second)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-t.C:
		return true
	}
}

// Reset makes the next pause the first, after a success.
func (b *Backoff) Reset() { b.d = 0 }
