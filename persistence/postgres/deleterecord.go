package postgres

import (
	"context"
	"fmt"

	"github.com/retrysafe/retrysafe/persistence"
)

// deleteRecordSQL is the operator's release (docs/protocol.md): it deletes
// the record only if it is the one the operator read (status, token,
// expiry and in-progress expiry), and answers whether it deleted, and
// whether a record is left.
const deleteRecordSQL = `WITH deleted AS (
	DELETE FROM {t} WHERE id = $1 AND status = $2 AND owner_token = $3 AND expiration = $4
		AND in_progress_expiration IS NOT DISTINCT FROM $5
	RETURNING true
), held AS MATERIALIZED (
	SELECT FROM {t} WHERE id = $1 AND NOT EXISTS (SELECT FROM deleted)
	FOR SHARE
)
SELECT EXISTS (SELECT FROM deleted), EXISTS (SELECT FROM held)`

// DeleteRecord deletes the record for seen.Key, but only if the stored
// record is still seen. That is the same status, owner token, expiry and
// in-progress expiry. It is for operators' tools, which delete a record
// they have read and shown. The library releases keys with [Store.Delete],
// which deletes only the caller's own reservation.
//
// It runs one statement, and NOTIFY after a deletion (see [Store.Watch]).
// It returns [persistence.ErrNotFound] when there is no record. It returns
// an error wrapping [persistence.ErrChanged], deleting nothing, when the
// record is not seen any more. Other failures are returned wrapped.
func (s *Store) DeleteRecord(ctx context.Context, seen *persistence.Record) error {
	var deleted, held bool
	err := s.db.QueryRow(ctx, s.deleteRecordSQL,
		seen.Key, string(seen.Status), seen.Token, seen.ExpiresAt.Unix(), inProgressMillis(seen.InProgressExpiresAt),
	).Scan(&deleted, &held)
	switch {
	case err != nil:
		return s.opError("delete", seen.Key, err)
	case deleted:
		s.notify(ctx, seen.Key, nil)
		return nil
	case held:
		return fmt.Errorf("persistence/postgres: delete %q: %w", seen.Key, persistence.ErrChanged)
	}
	return persistence.ErrNotFound
}
