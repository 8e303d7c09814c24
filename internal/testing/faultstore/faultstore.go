// Package faultstore wraps a persistence.Store to inject faults, for tests
// of what the library does when its store misbehaves: requests that fail
// before reaching the store, requests that reach it but whose reply is lost,
// and lost replies that a client retries.
package faultstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// Op names a Store method.
type Op string

// The Store methods.
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpUpdate Op = "update"
	OpDelete Op = "delete"
	OpCommit Op = "commit"
)

// Fault is what to do to one call.
type Fault int

const (
	// None passes the call through.
	None Fault = iota
	// FailBefore fails the call without reaching the inner store.
	FailBefore
	// LoseReply performs the call on the inner store, then reports
	// ErrInjected instead of its result.
	LoseReply
	// RetryAfterLostReply performs the call, loses the reply, and performs
	// it again, returning the second result: what an SDK's retryer does
	// after a timeout.
	RetryAfterLostReply
	// DropExisting performs a Put and, when it conflicts, removes the
	// existing record from the *ConflictError, as a store that cannot return
	// it atomically does.
	DropExisting
)

// ErrInjected is the error of injected failures.
var ErrInjected = errors.New("faultstore: injected failure")

// Store is a persistence.Store that injects faults into the calls it passes
// to Inner.
type Store struct {
	Inner persistence.Store

	// Fault, when set, chooses the fault for each call; n counts the calls
	// of op so far, from 1.
	Fault func(op Op, key string, n int) Fault

	// Before, when set, runs before each call reaches Inner, for example to
	// change the inner store between a conflict and the read that follows.
	Before func(op Op, key string, n int)

	mu    sync.Mutex
	calls map[Op]int
}

var (
	_ persistence.Store     = (*Store)(nil)
	_ persistence.Committer = (*Store)(nil)
	_ persistence.Unwrapper = (*Store)(nil)
)

// New returns a Store over inner that injects nothing until Fault is set.
func New(inner persistence.Store) *Store { return &Store{Inner: inner} }

// Calls returns how many calls of op the Store has received.
func (s *Store) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

func (s *Store) start(op Op, key string) Fault {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = make(map[Op]int)
	}
	s.calls[op]++
	n := s.calls[op]
	fault, before := s.Fault, s.Before
	s.mu.Unlock()
	if before != nil {
		before(op, key, n)
	}
	if fault == nil {
		return None
	}
	return fault(op, key, n)
}

// do applies fault to call, which performs the operation on Inner.
func do(fault Fault, call func() error) error {
	switch fault {
	case FailBefore:
		return ErrInjected
	case LoseReply:
		_ = call()
		return ErrInjected
	case RetryAfterLostReply:
		_ = call()
		return call()
	}
	return call()
}

// Put implements persistence.Store.
func (s *Store) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	fault := s.start(OpPut, rec.Key)
	err := do(fault, func() error { return s.Inner.Put(ctx, rec, now) })
	var conflict *persistence.ConflictError
	if fault == DropExisting && errors.As(err, &conflict) {
		return &persistence.ConflictError{}
	}
	return err
}

// Get implements persistence.Store.
func (s *Store) Get(ctx context.Context, key string) (*persistence.Record, error) {
	var rec *persistence.Record
	err := do(s.start(OpGet, key), func() (err error) {
		rec, err = s.Inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Update implements persistence.Store.
func (s *Store) Update(ctx context.Context, rec *persistence.Record) error {
	return do(s.start(OpUpdate, rec.Key), func() error { return s.Inner.Update(ctx, rec) })
}

// Delete implements persistence.Store.
func (s *Store) Delete(ctx context.Context, key, token string) error {
	return do(s.start(OpDelete, key), func() error { return s.Inner.Delete(ctx, key, token) })
}

// Commit implements persistence.Committer, over an Inner that commits.
func (s *Store) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	committer, ok := s.Inner.(persistence.Committer)
	if !ok {
		return errors.New("faultstore: the inner store does not commit staged writes")
	}
	return do(s.start(OpCommit, rec.Key), func() error { return committer.Commit(ctx, rec, writes) })
}

// Unwrap returns Inner.
func (s *Store) Unwrap() persistence.Store { return s.Inner }

// On returns a Fault function that injects fault into the nth call of op
// (every call when n is 0) and nothing else.
func On(op Op, n int, fault Fault) func(Op, string, int) Fault {
	return func(o Op, _ string, i int) Fault {
		if o == op && (n == 0 || i == n) {
			return fault
		}
		return None
	}
}
