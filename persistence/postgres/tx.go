package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/persistence"
)

// ErrAlreadyCompleted is returned (wrapped) by [Store.CompleteTx] when the
// record is the caller's own, completed already. An earlier attempt
// committed its completion, and the writes that went with it. Roll the
// transaction back, since its writes would apply a second time.
var ErrAlreadyCompleted = errors.New("persistence/postgres: the caller's completion is committed already; roll back")

// CompleteTx runs the completion of rec in tx, the transaction of the
// handler's own writes. rec.Status is [persistence.StatusCompleted]. The
// completion and those writes thus commit together, or neither does.
// CompleteTx is the building block of a completion in the same
// transaction as a handler's side effect in the same database. The
// statement is Update's, fenced on the token and the in-progress status
// (docs/protocol.md, commit).
//
// It returns nil when the completion applied in tx. Commit tx to make it,
// and the handler's writes, durable. It returns an error wrapping
// [persistence.ErrFenced] when the record is not the caller's reservation
// (taken over, released or never written). It returns one wrapping
// [ErrAlreadyCompleted] when the caller's own completion is there already.
// Either way it wrote nothing, but tx holds the handler's writes. Roll it
// back. Any other error leaves tx failed, since PostgreSQL aborts a
// transaction whose statement failed. Roll it back too. With
// [Options.MaxResponseSize], it returns [persistence.ErrResponseOmitted]
// when it completed the record without its response. The completion
// applied, so commit.
//
// From the completion to the end of tx, tx holds the record's row lock. A
// reservation of the key, a renewal and a release wait for the commit or
// rollback. They then see its outcome. Keep the rest of tx short.
//
// The completion needs READ COMMITTED, PostgreSQL's default, for tx. At
// REPEATABLE READ or SERIALIZABLE, a renewal of the lease may commit after
// tx's first statement. The completion then fails with a serialization
// failure (SQLSTATE 40001). That is because tx cannot update a row changed
// since its snapshot.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, rec *persistence.Record) error {
	_, err := s.completeTx(ctx, tx, rec)
	return err
}

// completeTx is CompleteTx. It returns the record as stored, too, when
// the completion applied.
func (s *Store) completeTx(ctx context.Context, tx pgx.Tx, rec *persistence.Record) (*persistence.Record, error) {
	if tx == nil {
		return nil, errors.New("persistence/postgres: CompleteTx: nil transaction")
	}
	if rec.Status != persistence.StatusCompleted {
		return nil, fmt.Errorf("persistence/postgres: CompleteTx %q: status %s, want %s", rec.Key, rec.Status, persistence.StatusCompleted)
	}
	return s.update(ctx, tx, "complete in transaction", rec, true)
}
