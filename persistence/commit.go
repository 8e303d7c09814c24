package persistence

import (
	"context"
	"errors"
	"sync"
)

// A Committer is a [Store] that can commit writes of a function's own
// together with the completion of its key, in one atomic step. Both
// happen, or neither does. So a side effect in the same database happens
// exactly once. The writes are the store's own kind (for DynamoDB,
// transaction items). The function stages them in the context the library
// gives it, with the store package's function (for DynamoDB,
// dynamodb.Stage).
//
// A store that decorates another (a cache) implements Committer by
// passing Commit on. It also has a method Unwrap() Store that returns the
// other. So when a handler is wrapped, the library can check that the
// store underneath commits (see [Commits]).
type Committer interface {
	Store

	// Commit completes rec, as Update does, and applies writes,
	// atomically. The stored record must be the caller's own reservation,
	// with rec.Token and in progress. On success both happened. Otherwise
	// neither did, and the error says why:
	//
	//   - [ErrFenced]: the stored record is not the caller's reservation.
	//     Another invocation took the key over, or the record is gone.
	//   - An error matching [ErrCommitCanceled] (a [*CommitCanceledError]):
	//     the store refused the commit, and nothing was written. A write's
	//     own condition failed, the writes exceed the store's limits, or
	//     the store cannot run them (no transactions).
	//   - Any other error: the outcome is unknown (a lost reply).
	//
	// The stored record may already be the caller's own completed record.
	// Then an earlier attempt committed, and Commit succeeds without
	// writing anything again, staged writes included. So repeating Commit
	// with the same rec and writes is safe. A Commit without writes is an
	// Update.
	Commit(ctx context.Context, rec *Record, writes []any) error
}

// A TxStore is a [Store] whose transactions a function's own writes run
// in (idempotency.WithTransactions). The library begins a transaction
// before the function runs. The function writes in it (for PostgreSQL,
// postgres.Tx(ctx)). The record's completion commits with those writes,
// or neither does. The reservation stays outside the transaction, so that
// a concurrent duplicate sees it at once.
type TxStore interface {
	Store

	// BeginTx begins the transaction of the call that holds rec's key,
	// and returns ctx carrying it for the function.
	BeginTx(ctx context.Context, rec *Record) (context.Context, Tx, error)
}

// A Tx is a transaction that [TxStore.BeginTx] began.
type Tx interface {
	// Commit completes rec in the transaction, as Update does, and
	// commits it with the function's writes. Its errors are those of
	// [Committer.Commit]: [ErrFenced], a [*CommitCanceledError] when
	// nothing was written, or any other error when the outcome is unknown.
	// When the record is the caller's own completed record already, Commit
	// commits nothing and succeeds.
	Commit(ctx context.Context, rec *Record) error

	// Rollback ends the transaction and writes nothing of it. It does
	// nothing after Commit.
	Rollback(ctx context.Context) error
}

// Commits reports how store commits a function's writes with the
// completion of its key. staged is true when store is a [Committer] and so
// is every store it decorates. tx (in a transaction) is true when store is
// a [TxStore] and so is every store it decorates. The store underneath
// decides. A decorator (a cache) passes both on, and has a method
// Unwrap() Store that returns the store it decorates.
func Commits(store Store) (staged, tx bool) {
	staged, tx = true, true
	for {
		_, s := store.(Committer)
		_, t := store.(TxStore)
		staged, tx = staged && s, tx && t
		u, ok := store.(interface{ Unwrap() Store })
		if !ok {
			return staged, tx
		}
		store = u.Unwrap()
	}
}

// ErrCommitCanceled is matched (with [errors.Is]) by every
// [*CommitCanceledError].
var ErrCommitCanceled = errors.New("persistence: commit canceled; nothing was written")

// ErrNoTransactions is matched (with [errors.Is]) by the reason in a
// [*CommitCanceledError] when the store cannot run transactions at all.
// That is the case of a server or table without them. Every commit will
// be refused until the configuration changes.
var ErrNoTransactions = errors.New("persistence: the store cannot run transactions")

// CommitCanceledError is returned by [Committer.Commit] when the commit
// was refused and nothing was written. A staged write's own condition
// failed (an insufficient balance, say), or the writes exceed the store's
// limits.
type CommitCanceledError struct {
	// Err is the store's error. It carries the store's reasons, where the
	// store gives them. For DynamoDB, it carries a
	// *types.TransactionCanceledException with a reason for each write.
	// The reasons are in the order the writes were staged, with the
	// record's completion last.
	Err error
}

// Error implements error.
func (e *CommitCanceledError) Error() string {
	return "persistence: commit canceled, nothing was written: " + e.Err.Error()
}

// Unwrap returns the store's error.
func (e *CommitCanceledError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCommitCanceled) true.
func (e *CommitCanceledError) Is(target error) bool { return target == ErrCommitCanceled }

// Staging collects the writes a function stages for the commit of its
// key. It is safe for concurrent use.
type Staging struct {
	mu     sync.Mutex
	writes []any
	closed bool
}

type stagingKey struct{}

// NewStagingContext returns ctx with a new [Staging], which [Stage] adds
// to. The library gives it to a function whose store commits.
func NewStagingContext(ctx context.Context) (context.Context, *Staging) {
	s := &Staging{}
	return context.WithValue(ctx, stagingKey{}, s), s
}

// Stage adds writes to the [Staging] of ctx. It returns an error when ctx
// has none, outside a function whose key commits with staged writes
// (idempotency.WithTransactions). It also returns an error once the
// function has returned.
func Stage(ctx context.Context, writes ...any) error {
	s, ok := ctx.Value(stagingKey{}).(*Staging)
	if !ok {
		return errors.New("persistence: nothing to stage writes in: the function is not run with transactions (idempotency.WithTransactions)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("persistence: the function has returned; writes staged now are not committed")
	}
	s.writes = append(s.writes, writes...)
	return nil
}

// Close ends the staging and returns the writes staged. Later writes are
// refused, so that none is staged once the commit has been sent.
func (s *Staging) Close() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.writes
}
