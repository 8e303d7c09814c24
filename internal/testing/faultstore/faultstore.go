// Package faultstore wraps a persistence.Store to inject faults, for tests
// of what the library does when its store misbehaves: requests that fail
// before reaching the store, requests that reach it but whose reply is lost,
// lost replies that a client retries, and writes that time out for their
// caller but reach the store later, after the caller moved on.
//
// Over a persistence.TxStore, the faults reach the transactions too: the
// BeginTx that begins one (OpBegin) and the Commit of its Tx (OpCommit).
// A transaction lives on one connection of the inner store, so a fault
// there is what a client of that connection sees (see Store.BeginTx).
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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
	// OpBegin is TxStore.BeginTx.
	OpBegin Op = "begin"
	// OpWatch is Notifier.Watch.
	OpWatch Op = "watch"
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
	// ApplyLate holds a write back and fails it at once with a timeout
	// (an error matching ErrInjected and os.ErrDeadlineExceeded), as a
	// request stuck in the network does; the write reaches the inner store
	// later, when its Held is applied (see Store.OnHold). A Get is not
	// held, since a late read changes nothing: it fails as with FailBefore.
	ApplyLate
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

	// OnHold, when set, is given each write that ApplyLate holds back, on
	// the caller's goroutine, before the caller gets its error, with the
	// caller's context. It decides when the write reaches Inner: it calls
	// Apply then, from any goroutine. Without OnHold, TakeHeld returns the
	// held writes.
	OnHold func(ctx context.Context, h *Held)

	// KeepUpdates makes the Store keep a copy of the record of every
	// Update call, whatever its fault, which Updates returns.
	KeepUpdates bool

	mu      sync.Mutex
	calls   map[Op]int
	held    []*Held
	updates []persistence.Record
}

// Held is a write that ApplyLate held back: it reaches the inner store
// when Apply is called.
type Held struct {
	// Op and Key are the write's.
	Op  Op
	Key string
	// Record is a copy of the record the write carries (nil for a Delete),
	// taken when it was held, since the caller goes on changing its own.
	Record *persistence.Record

	ctx   context.Context // the caller's, for its values
	apply func(context.Context) error
	once  sync.Once
	err   error
}

// Apply performs the held write on the inner store, once, and returns its
// result; later calls return the first result. The write runs with ctx's
// deadline and cancellation, not with the caller's, which has usually
// ended, and with the caller's context values.
func (h *Held) Apply(ctx context.Context) error {
	h.once.Do(func() { h.err = h.apply(valuesOf{Context: ctx, values: h.ctx}) })
	return h.err
}

// valuesOf is a context with the deadline and cancellation of Context and
// the values of values (then Context's).
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any {
	if v := c.values.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// TakeHeld returns the writes held back since the last call, in the order
// they were held, when no OnHold took them.
func (s *Store) TakeHeld() []*Held {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.held
	s.held = nil
	return held
}

// hold holds a write back and returns the caller's error.
func (s *Store) hold(ctx context.Context, h *Held) error {
	h.ctx = ctx
	s.mu.Lock()
	onHold := s.OnHold
	if onHold == nil {
		s.held = append(s.held, h)
	}
	s.mu.Unlock()
	if onHold != nil {
		onHold(ctx, h)
	}
	return fmt.Errorf("%w: %s %q timed out (held back; it reaches the store later): %w", ErrInjected, h.Op, h.Key, os.ErrDeadlineExceeded)
}

// snapshot returns a copy of rec that shares nothing with it.
func snapshot(rec *persistence.Record) *persistence.Record {
	c := *rec
	c.Response = slices.Clone(rec.Response)
	return &c
}

var (
	_ persistence.Store     = (*Store)(nil)
	_ persistence.Committer = (*Store)(nil)
	_ persistence.TxStore   = (*Store)(nil)
)

// New returns a Store over inner that injects nothing until Fault is set.
func New(inner persistence.Store) *Store { return &Store{Inner: inner} }

// Updates returns the records of the Update calls the Store has received,
// in their order, when KeepUpdates is set.
func (s *Store) Updates() []persistence.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates)
}

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
	case FailBefore, ApplyLate:
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
	if fault == ApplyLate {
		snap := snapshot(rec)
		return s.hold(ctx, &Held{Op: OpPut, Key: rec.Key, Record: snap, apply: func(ctx context.Context) error {
			return s.Inner.Put(ctx, snapshot(snap), now)
		}})
	}
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
	if s.KeepUpdates {
		s.mu.Lock()
		s.updates = append(s.updates, *snapshot(rec))
		s.mu.Unlock()
	}
	fault := s.start(OpUpdate, rec.Key)
	if fault == ApplyLate {
		snap := snapshot(rec)
		return s.hold(ctx, &Held{Op: OpUpdate, Key: rec.Key, Record: snap, apply: func(ctx context.Context) error {
			return s.Inner.Update(ctx, snapshot(snap))
		}})
	}
	return do(fault, func() error { return s.Inner.Update(ctx, rec) })
}

// Delete implements persistence.Store.
func (s *Store) Delete(ctx context.Context, key, token string) error {
	fault := s.start(OpDelete, key)
	if fault == ApplyLate {
		return s.hold(ctx, &Held{Op: OpDelete, Key: key, apply: func(ctx context.Context) error {
			return s.Inner.Delete(ctx, key, token)
		}})
	}
	return do(fault, func() error { return s.Inner.Delete(ctx, key, token) })
}

// Commit implements persistence.Committer, over an Inner that commits.
func (s *Store) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	committer, ok := s.Inner.(persistence.Committer)
	if !ok {
		return errors.New("faultstore: the inner store does not commit staged writes")
	}
	fault := s.start(OpCommit, rec.Key)
	if fault == ApplyLate {
		snap, staged := snapshot(rec), slices.Clone(writes)
		return s.hold(ctx, &Held{Op: OpCommit, Key: rec.Key, Record: snap, apply: func(ctx context.Context) error {
			return committer.Commit(ctx, snapshot(snap), staged)
		}})
	}
	return do(fault, func() error { return committer.Commit(ctx, rec, writes) })
}

// BeginTx implements persistence.TxStore, over an Inner that runs
// transactions. Its own faults are those of a BEGIN: FailBefore and
// ApplyLate fail it without reaching Inner (a BEGIN that reaches the
// server after its client gave up finds the connection closed: nothing
// begins); LoseReply begins the transaction, rolls it back, as the server
// does when the client closes the connection, and fails;
// RetryAfterLostReply does that, then begins another and returns it.
//
// The Tx it returns injects the faults of OpCommit into its Commit:
//
//   - FailBefore: COMMIT is never sent; the client closes the connection,
//     so the transaction is rolled back, and the error says nothing of it
//     (an unknown outcome, to the caller);
//   - LoseReply: the commit runs, and its reply is lost;
//   - RetryAfterLostReply: as LoseReply. A client does not send a COMMIT
//     again: a transaction ends with its first;
//   - ApplyLate: the commit is held back, on the transaction's open
//     connection, and runs when its Held is applied, as the completion
//     and COMMIT of a client that pipelined them, held in the network,
//     would. It cannot outlive the connection: if the connection ends
//     meanwhile (a terminated backend, a restart), the server rolls the
//     transaction back, and the late commit fails. Rollback does nothing
//     once the commit is held: it was sent.
func (s *Store) BeginTx(ctx context.Context, rec *persistence.Record) (context.Context, persistence.Tx, error) {
	txStore, ok := s.Inner.(persistence.TxStore)
	if !ok {
		return ctx, nil, errors.New("faultstore: the inner store does not run transactions")
	}
	begin := func() (context.Context, persistence.Tx, error) {
		txCtx, tx, err := txStore.BeginTx(ctx, rec)
		if err != nil {
			return ctx, nil, err
		}
		return txCtx, &faultTx{s: s, inner: tx}, nil
	}
	switch s.start(OpBegin, rec.Key) {
	case FailBefore, ApplyLate:
		return ctx, nil, ErrInjected
	case LoseReply:
		if _, tx, err := begin(); err == nil {
			_ = tx.Rollback(ctx)
		}
		return ctx, nil, ErrInjected
	case RetryAfterLostReply:
		if _, tx, err := begin(); err == nil {
			_ = tx.Rollback(ctx)
		}
	}
	return begin()
}

// faultTx is a transaction of the inner store whose Commit takes the
// faults of OpCommit. The library calls its methods one at a time.
type faultTx struct {
	s     *Store
	inner persistence.Tx
	sent  bool // Commit was called: Rollback does nothing
}

func (t *faultTx) Commit(ctx context.Context, rec *persistence.Record) error {
	t.sent = true
	switch t.s.start(OpCommit, rec.Key) {
	case ApplyLate:
		snap := snapshot(rec)
		return t.s.hold(ctx, &Held{Op: OpCommit, Key: rec.Key, Record: snap, apply: func(ctx context.Context) error {
			return t.inner.Commit(ctx, snapshot(snap))
		}})
	case FailBefore:
		_ = t.inner.Rollback(ctx)
		return ErrInjected
	case LoseReply, RetryAfterLostReply:
		_ = t.inner.Commit(ctx, rec)
		return ErrInjected
	}
	return t.inner.Commit(ctx, rec)
}

func (t *faultTx) Rollback(ctx context.Context) error {
	if t.sent {
		return nil
	}
	return t.inner.Rollback(ctx)
}

// Unwrap returns Inner.
func (s *Store) Unwrap() persistence.Store { return s.Inner }

// errNoWatch is Watch's error when Inner wakes no waiters.
var errNoWatch = errors.New("faultstore: the inner store is not a persistence.Notifier")

// Watch implements persistence.Notifier over an Inner that does; over
// another, it fails, and the caller polls. FailBefore fails it too, and
// LoseReply watches but loses every wake-up. Other faults pass it through.
func (s *Store) Watch(ctx context.Context, key string) (<-chan *persistence.Record, func(), error) {
	fault := s.start(OpWatch, key)
	if fault == FailBefore {
		return nil, nil, ErrInjected
	}
	n, ok := s.Inner.(persistence.Notifier)
	if !ok {
		return nil, nil, errNoWatch
	}
	woken, stop, err := n.Watch(ctx, key)
	if err == nil && fault == LoseReply {
		woken = make(chan *persistence.Record)
	}
	return woken, stop, err
}

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
