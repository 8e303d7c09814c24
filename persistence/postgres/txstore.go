package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/persistence"
)

// The store's transactions (idempotency.WithTransactions): BeginTx begins
// one for the handler, Tx gives it to the handler, and the
// persistence.Tx that BeginTx returns completes the key in it and commits
// it, or rolls it back. The package documentation, Transactions, says
// what each outcome of the commit means.

var _ persistence.TxStore = (*Store)(nil)

// beginner is what BeginTx needs of the Store's DB: *pgxpool.Pool and
// *pgx.Conn have it.
type beginner interface {
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
}

type txKey struct{}

// Tx returns the transaction that the handler's writes belong to. That is
// in a handler wrapped with idempotency.WithTransactions on a Store. What
// the handler writes in it commits with the completion of its key, or not
// at all. Tx reports false outside such a handler.
//
// The library commits and rolls back the transaction. Its Commit and
// Rollback return an error and do nothing. To undo part of its writes, a
// handler uses a savepoint (the transaction's Begin). To undo all of them,
// it returns an error. A statement that fails aborts the whole
// transaction, as in any PostgreSQL transaction. The handler then returns
// the error, or the commit is canceled.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(handlerTx)
	return tx, ok
}

// ErrTxOwned is returned by Commit and Rollback of the transaction that
// Tx returns: the library ends it, with the completion of the key.
var ErrTxOwned = errors.New("persistence/postgres: the transaction commits with the completion of the key, and only then: return an error to roll it back")

// handlerTx is the handler's view of the transaction: all but its end.
type handlerTx struct{ pgx.Tx }

func (handlerTx) Commit(context.Context) error   { return ErrTxOwned }
func (handlerTx) Rollback(context.Context) error { return ErrTxOwned }

// BeginTx implements [persistence.TxStore]. It begins a transaction at
// READ COMMITTED on a connection of the pool of its own. It returns ctx
// carrying it ([Tx]). The reservation of rec, which committed before, stays
// outside it. See the package documentation, Transactions.
//
// The Store's DB must begin transactions on connections of their own. A
// *pgxpool.Pool does. A *pgx.Conn cannot, since its transaction would take
// the connection that the lease's renewals use. Nor can a pgx.Tx. BeginTx
// then returns an error, and the handler does not run.
func (s *Store) BeginTx(ctx context.Context, rec *persistence.Record) (context.Context, persistence.Tx, error) {
	b, ok := s.db.(beginner)
	if _, conn := s.db.(*pgx.Conn); !ok || conn {
		return ctx, nil, fmt.Errorf("persistence/postgres: begin %q: the store's DB, a %T, cannot run a transaction beside the store's own statements: give New a *pgxpool.Pool", rec.Key, s.db)
	}
	// READ COMMITTED whatever the session's default: the completion
	// updates the record, which the lease's renewals change while the
	// handler runs (see CompleteTx).
	tx, err := b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return ctx, nil, fmt.Errorf("persistence/postgres: begin %q: %w", rec.Key, err)
	}
	return context.WithValue(ctx, txKey{}, handlerTx{tx}), &storeTx{s: s, tx: tx}, nil
}

// storeTx is the persistence.Tx of a transaction BeginTx began. The
// library calls its methods one at a time.
type storeTx struct {
	s    *Store
	tx   pgx.Tx
	done bool // committed or rolled back: nothing more to do
}

// Commit implements persistence.Tx: the completion of rec (CompleteTx),
// then COMMIT. Its errors say what was written (the package
// documentation, Transactions): persistence.ErrFenced and a
// *persistence.CommitCanceledError when nothing was, any other error when
// COMMIT got no answer.
func (t *storeTx) Commit(ctx context.Context, rec *persistence.Record) error {
	if t.done {
		return fmt.Errorf("persistence/postgres: commit %q: the transaction has ended", rec.Key)
	}
	t.done = true
	stored, err := t.s.completeTx(ctx, t.tx, rec)
	omitted := errors.Is(err, persistence.ErrResponseOmitted)
	switch {
	case err == nil, omitted:
	case errors.Is(err, ErrAlreadyCompleted):
		// An earlier attempt committed the completion and the writes
		// that went with it (docs/protocol.md, commit: done).
		t.rollback(ctx)
		if t.s.max > 0 && len(rec.Response) > t.s.max {
			return persistence.ErrResponseOmitted
		}
		return nil
	case errors.Is(err, persistence.ErrFenced):
		t.rollback(ctx)
		return err
	default:
		// COMMIT was not sent, and will not be: whatever failed (a
		// statement the server refused, which aborted the transaction,
		// or the connection), the transaction cannot commit. The server
		// rolls back a transaction whose connection is gone.
		t.rollback(ctx)
		return &persistence.CommitCanceledError{Err: err}
	}
	if err := t.tx.Commit(ctx); err != nil {
		return commitError(rec.Key, err)
	}
	t.s.notify(ctx, rec.Key, stored)
	if omitted {
		return persistence.ErrResponseOmitted
	}
	return nil
}

// commitError classifies a failed COMMIT of the transaction of key: a
// *persistence.CommitCanceledError when it proves that nothing was
// committed, an error of unknown outcome otherwise.
func commitError(key string, err error) error {
	err = fmt.Errorf("persistence/postgres: commit %q: %w", key, err)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrTxCommitRollback):
		// The server answered ROLLBACK: the transaction had failed.
		return &persistence.CommitCanceledError{Err: err}
	case errors.As(err, &pgErr) && cmp.Or(pgErr.SeverityUnlocalized, pgErr.Severity) == "ERROR":
		// The server refused to commit (a deferred constraint, a
		// serialization failure at commit): an ERROR ends the
		// transaction, rolled back. A FATAL or a PANIC ends the session
		// instead, and may come after the commit is durable (while it
		// waits for a synchronous standby): unknown.
		return &persistence.CommitCanceledError{Err: err}
	case pgconn.SafeToRetry(err):
		// COMMIT was not sent at all; the connection is closed, and the
		// server rolls back its transaction.
		return &persistence.CommitCanceledError{Err: err}
	}
	return fmt.Errorf("%w; the outcome is unknown", err)
}

// Rollback implements persistence.Tx. It does nothing after Commit or
// Rollback.
func (t *storeTx) Rollback(ctx context.Context) error {
	if t.done {
		return nil
	}
	t.done = true
	if err := t.tx.Rollback(ctx); err != nil {
		return fmt.Errorf("persistence/postgres: rollback: %w", err)
	}
	return nil
}

// rollback ends the transaction after a commit that did not happen. A
// failure to roll back closes the connection, which ends the transaction
// on the server: there is nothing more to do.
func (t *storeTx) rollback(ctx context.Context) { _ = t.tx.Rollback(ctx) }
