// Package teststeps records what an idempotent call's observers see, as
// the steps of the state machine, for the tests of the packages that run
// calls.
package teststeps

import (
	"context"
	"errors"
	"sync"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// A Log is an idempotency.Observer that records every event, and the
// steps they report (see Step). The zero value is ready to use.
type Log struct {
	mu    sync.Mutex
	steps []string
	all   []idempotency.Event
}

// Observe implements idempotency.Observer.
func (l *Log) Observe(_ context.Context, ev idempotency.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, ev)
	if step := Step(ev); step != "" {
		l.steps = append(l.steps, step)
	}
}

// Step names the step of the state machine that ev reports, or "" for the
// events that only time steps (store requests, the function's run):
// "reserved", "waited", "renewed" or "renewal failed", the settling write
// ("complete", "record", "commit", "release"; with what refused it:
// "complete fenced", "release failed", ...), and how the call ended, its
// outcome ("new", "replay", ...).
func Step(ev idempotency.Event) string {
	switch ev.Kind {
	case idempotency.EventReserved:
		return "reserved"
	case idempotency.EventWaited:
		return "waited"
	case idempotency.EventRenewed:
		if ev.Err != nil {
			return "renewal failed"
		}
		return "renewed"
	case idempotency.EventSettled:
		switch {
		case ev.Err == nil:
			return ev.Op
		case errors.Is(ev.Err, persistence.ErrFenced):
			return ev.Op + " fenced"
		case errors.Is(ev.Err, persistence.ErrResponseOmitted):
			return ev.Op + " omitted"
		case errors.Is(ev.Err, persistence.ErrCommitCanceled):
			return ev.Op + " canceled"
		}
		return ev.Op + " failed"
	case idempotency.EventCallEnded:
		return string(ev.Outcome)
	}
	return ""
}

// Events returns every event observed.
func (l *Log) Events() []idempotency.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]idempotency.Event(nil), l.all...)
}

// Steps returns the steps observed.
func (l *Log) Steps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.steps...)
}

// Take returns the steps observed since the last Take.
func (l *Log) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.steps
	l.steps = nil
	return s
}

// ErrOf returns the error of the first event of step.
func (l *Log) ErrOf(step string) error {
	for _, ev := range l.Events() {
		if Step(ev) == step {
			return ev.Err
		}
	}
	return nil
}
