package wake

import (
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// A wake-up reaches every watch of its key and no other, and a pending
// one stands for any number: waking never blocks.
func TestSetWakesTheWatchesOfAKey(t *testing.T) {
	var s Set
	a1, first := s.Add("a")
	if !first {
		t.Fatal("the first watch of a key is not first")
	}
	a2, first := s.Add("a")
	if first {
		t.Fatal("the second watch of a key is first")
	}
	b, _ := s.Add("b")
	s.Wake("a", nil)
	s.Wake("a", nil)
	for _, ch := range []chan *persistence.Record{a1, a2} {
		select {
		case <-ch:
		default:
			t.Fatal("a watch of a was not woken")
		}
	}
	select {
	case <-b:
		t.Fatal("b was woken by a's wake-up")
	default:
	}
	s.WakeAll()
	for _, ch := range []chan *persistence.Record{a1, a2, b} {
		select {
		case <-ch:
		default:
			t.Fatal("WakeAll missed a watch")
		}
	}
	if s.Remove("a", a1) || !s.Remove("a", a2) || s.Keys() != 1 || !s.Remove("b", b) || s.Keys() != 0 {
		t.Fatal("Remove did not report the last watch of each key")
	}
}

// A wake-up carries a copy of its record to each watch. Two wake-ups
// pending at once carry none: the waiter reads the record then.
func TestSetCarriesTheRecordOfOneWakeUp(t *testing.T) {
	var s Set
	a1, _ := s.Add("a")
	a2, _ := s.Add("a")
	rec := &persistence.Record{Key: "a", Status: persistence.StatusCompleted, Token: "t1"}
	s.Wake("a", rec)
	got1, got2 := <-a1, <-a2
	if !reflect.DeepEqual(got1, rec) || !reflect.DeepEqual(got2, rec) || got1 == got2 || got1 == rec {
		t.Fatalf("got %v and %v, want copies of %v", got1, got2, rec)
	}
	s.Wake("a", rec)
	s.Wake("a", &persistence.Record{Key: "a", Status: persistence.StatusCompleted, Token: "t2"})
	if got := <-a1; got != nil {
		t.Fatalf("two wake-ups at once carried %v, want nil", got)
	}
	select {
	case got := <-a1:
		t.Fatalf("a second value %v is pending", got)
	default:
	}
}

// The pauses double from 10 milliseconds to a second, start again after
// Reset, and end when done is closed.
func TestBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Backoff
		var got []time.Duration
		for range 9 {
			start := time.Now()
			if !b.Pause(nil) {
				t.Fatal("Pause ended without done")
			}
			got = append(got, time.Since(start))
		}
		want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000}
		for i := range want {
			if got[i] != want[i]*time.Millisecond {
				t.Fatalf("pauses %v, want %v ms", got, want)
			}
		}
		b.Reset()
		done := make(chan struct{})
		close(done)
		if b.Pause(done) {
			t.Fatal("Pause went on after done was closed")
		}
	})
}
