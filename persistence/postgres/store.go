package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrysafe/retrysafe/internal/epoch"
	"github.com/retrysafe/retrysafe/persistence"
)

// DB is what a Store runs its statements on: *pgxpool.Pool (the usual
// choice), *pgx.Conn (not safe for concurrent use) or pgx.Tx satisfy it.
type DB interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store is a persistence.Store backed by a PostgreSQL table. It is safe
// for concurrent use when its DB is. Each method runs one statement, and
// NOTIFY after a completion or a release (see the package documentation).
type Store struct {
	db   DB
	name string // the table's name as given, for messages
	max  int

	putSQL, getSQL, updateSQL, deleteSQL string
	deleteRecordSQL, sweepSQL            string
	listSQL, listRangeSQL, listStuckSQL  string

	// listener wakes the Store's waiting calls (notify.go).
	listener listener
}

var (
	_ persistence.Store    = (*Store)(nil)
	_ persistence.Admin    = (*Store)(nil)
	_ persistence.Notifier = (*Store)(nil)
)

// New returns a Store that keeps records in table through db, usually a
// *pgxpool.Pool:
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	...
//	store, err := postgres.New(pool, "idempotency", func(o *postgres.Options) {
//		o.Schema = "app"
//	})
//
// New runs no statement; the table must exist (CreateTable, or Schema in
// a migration). It returns an error if db is nil, the table name is empty
// or too long, or the options are invalid.
func New(db DB, table string, optFns ...func(*Options)) (*Store, error) {
	if db == nil {
		return nil, errors.New("persistence/postgres: nil DB")
	}
	o, err := resolveOptions(optFns)
	if err != nil {
		return nil, err
	}
	t, err := qualifiedName(table, &o)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, name: table, max: o.MaxResponseSize}
	r := strings.NewReplacer("{t}", t)
	s.putSQL = r.Replace(putSQL)
	s.getSQL = r.Replace(getSQL)
	s.updateSQL = r.Replace(updateSQL)
	s.deleteSQL = r.Replace(deleteSQL)
	s.deleteRecordSQL = r.Replace(deleteRecordSQL)
	s.sweepSQL = r.Replace(sweepSQL)
	s.listSQL = r.Replace(listSQL)
	s.listRangeSQL = r.Replace(listRangeSQL)
	s.listStuckSQL = r.Replace(listStuckSQL)
	s.listener.channel, s.listener.dial = channelName(t), dialer(db)
	return s, nil
}

// The statements. {t} is the table. Every statement is one round trip;
// the conditions cite the rows of docs/protocol.md they implement.
//
// A write that does not apply reads the record to say why (the conflict's
// record, done or refused) in the same statement, with a locking read
// (FOR SHARE) that runs after the write. A plain read there would see the
// statement's snapshot, taken before the write waited for any concurrent
// transaction: a record completed or taken over meanwhile would be
// reported as it was. A locking read follows the row to its latest
// committed version and re-checks its condition on it (READ COMMITTED),
// so it reports the version the write's condition was evaluated against.
// FOR KEY SHARE would not do: it locks an old version whose update left
// the key alone, without following it. Only a record inserted after the
// snapshot (a concurrent reservation of a key that had none) is not seen
// at all: no version of it is in the snapshot for the read to follow.

// putSQL reserves a key (docs/protocol.md, reserve): it inserts the record
// with its own status ($13: in progress, or completed for a step's record),
// or takes over the existing one when that is not live at the caller's
// now: expired (expiration < $10, now in seconds rounded up), or in
// progress and lapsed (in_progress_expiration < $11, now in milliseconds
// rounded up); a conflict otherwise. It answers one row: whether it
// reserved, and, when it did not, the record that holds the key (all
// NULL when that record was inserted after the statement's snapshot).
//
// ON CONFLICT DO UPDATE evaluates its WHERE on the conflicting row's
// latest committed version, locked, even one the snapshot does not see;
// an insert that races another insert of the key waits for it to commit
// (or roll back) and then does the same. So of concurrent reservations of
// one key exactly one applies, whatever the order.
const putSQL = `WITH reserved AS (
	INSERT INTO {t} AS r (id, status, expiration, in_progress_expiration, validation, data, owner_token, error_type, error_message, response_omitted, held)
	VALUES ($1, $13, $2, $3, $4, $5, $6, $7, $8, $9, $12)
	ON CONFLICT (id) DO UPDATE SET
		status = excluded.status, expiration = excluded.expiration,
		in_progress_expiration = excluded.in_progress_expiration, validation = excluded.validation,
		data = excluded.data, owner_token = excluded.owner_token, error_type = excluded.error_type,
		error_message = excluded.error_message, response_omitted = excluded.response_omitted, held = excluded.held
	WHERE r.expiration < $10 OR (r.status = 'INPROGRESS' AND r.in_progress_expiration < $11 AND NOT r.held)
	RETURNING true
), held AS MATERIALIZED (
	SELECT status, expiration, in_progress_expiration, validation, data, owner_token, error_type, error_message, response_omitted, held
	FROM {t} WHERE id = $1 AND NOT EXISTS (SELECT FROM reserved)
	FOR SHARE
)
SELECT EXISTS (SELECT FROM reserved), held.* FROM (VALUES (1)) AS one (x) LEFT JOIN held ON true`

const getSQL = `SELECT status, expiration, in_progress_expiration, validation, data, owner_token, error_type, error_message, response_omitted, held
FROM {t} WHERE id = $1`

// updateSQL renews or completes the caller's own reservation
// (docs/protocol.md, renew, complete, record an error): token and status
// INPROGRESS, and for a renewal ($2 INPROGRESS) an in-progress expiry no
// later than its own, so that an earlier renewal applied after a later
// one changes nothing. It answers whether it applied, and, when it did
// not, whether the record already has the write's effect (done: the
// caller's own completed record for a completion, its own reservation
// with an expiry at least as late for a renewal; NULL when there is no
// record). When it applied, it answers the record's validation too, the
// one column it does not set.
const updateSQL = `WITH updated AS (
	UPDATE {t} SET status = $2, expiration = $3, in_progress_expiration = $4, data = $5,
		error_type = $6, error_message = $7, response_omitted = $8, held = $10
	WHERE id = $1 AND owner_token = $9 AND status = 'INPROGRESS'
		AND ($2 = 'COMPLETED' OR in_progress_expiration IS NULL OR in_progress_expiration <= $4)
	RETURNING validation
), held AS MATERIALIZED (
	SELECT owner_token = $9 AND (
		(status = 'COMPLETED' AND $2 = 'COMPLETED') OR
		(status = 'INPROGRESS' AND $2 = 'INPROGRESS' AND in_progress_expiration >= $4)) AS done
	FROM {t} WHERE id = $1 AND NOT EXISTS (SELECT FROM updated)
	FOR SHARE
)
SELECT EXISTS (SELECT FROM updated), (SELECT validation FROM updated), held.done FROM (VALUES (1)) AS one (x) LEFT JOIN held ON true`

// deleteSQL releases the caller's own reservation (docs/protocol.md,
// release): token and status INPROGRESS. It answers whether it deleted,
// and whether a record is left.
const deleteSQL = `WITH deleted AS (
	DELETE FROM {t} WHERE id = $1 AND owner_token = $2 AND status = 'INPROGRESS'
	RETURNING true
), held AS MATERIALIZED (
	SELECT FROM {t} WHERE id = $1 AND NOT EXISTS (SELECT FROM deleted)
	FOR SHARE
)
SELECT EXISTS (SELECT FROM deleted), EXISTS (SELECT FROM held)`

// Put implements [persistence.Store] with one statement (see putSQL). When
// a live record holds the key, it returns a [*persistence.ConflictError].
// Its Existing is that record, read in the same statement after the insert
// found it. Existing is nil only when that record was inserted by a
// reservation that committed while the statement ran. The caller then
// reads it with Get. Other failures are returned wrapped.
func (s *Store) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	var (
		reserved bool
		h        row
	)
	err := s.db.QueryRow(ctx, s.putSQL,
		rec.Key, rec.ExpiresAt.Unix(), inProgressMillis(rec.InProgressExpiresAt), nullText(rec.PayloadHash),
		nullBytes(rec.Response), rec.Token, nullText(clean(rec.ErrorType)), nullText(clean(rec.ErrorMessage)), rec.ResponseOmitted,
		epoch.CeilSeconds(now), epoch.CeilMillis(now), rec.Held, string(rec.Status),
	).Scan(append([]any{&reserved}, h.dest()...)...)
	if err != nil {
		return s.opError("put", rec.Key, err)
	}
	if reserved {
		return nil
	}
	conflict := &persistence.ConflictError{}
	if h.status.Valid {
		conflict.Existing = h.record(rec.Key)
	}
	return conflict
}

// Get implements persistence.Store with one SELECT, which reads the latest
// committed version of the record. It returns persistence.ErrNotFound when
// there is none, and other failures wrapped.
func (s *Store) Get(ctx context.Context, key string) (*persistence.Record, error) {
	var h row
	err := s.db.QueryRow(ctx, s.getSQL, key).Scan(h.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, persistence.ErrNotFound
	}
	if err != nil {
		return nil, s.opError("get", key, err)
	}
	return h.record(key), nil
}

// Update implements persistence.Store with one statement (see updateSQL):
// an UPDATE conditioned on the record being the caller's own reservation,
// its token and in progress. A completion that finds the caller's own
// completed record (an earlier attempt applied it, and its reply was
// lost) writes nothing and succeeds. It returns an error wrapping
// persistence.ErrFenced for any other record, or none; and
// persistence.ErrResponseOmitted when Options.MaxResponseSize made it
// complete the record without its response. Other failures are returned
// wrapped. A completion that applies is followed by NOTIFY, to wake the
// calls that wait for the key ([Store.Watch]).
func (s *Store) Update(ctx context.Context, rec *persistence.Record) error {
	stored, err := s.update(ctx, s.db, "update", rec, false)
	if stored != nil && stored.Status == persistence.StatusCompleted {
		s.notify(ctx, rec.Key, stored)
	}
	return err
}

// update runs updateSQL on db. Without inTx, the caller's own completed
// record is done (nil); with it, errAlreadyCompleted. When the write
// applied, it returns the record as stored, as Get would read it.
func (s *Store) update(ctx context.Context, db DB, op string, rec *persistence.Record, inTx bool) (stored *persistence.Record, err error) {
	response, omitted := rec.Response, rec.ResponseOmitted
	tooLarge := s.max > 0 && len(response) > s.max
	if tooLarge {
		response, omitted = nil, true
	}
	var (
		applied bool
		done    pgtype.Bool
		w       = row{
			status:       pgtype.Text{String: string(rec.Status), Valid: true},
			expiration:   pgtype.Int8{Int64: rec.ExpiresAt.Unix(), Valid: true},
			token:        pgtype.Text{String: rec.Token, Valid: true},
			errorType:    pgtype.Text{String: clean(rec.ErrorType)},
			errorMessage: pgtype.Text{String: clean(rec.ErrorMessage)},
			omitted:      pgtype.Bool{Bool: omitted, Valid: true},
			held:         pgtype.Bool{Bool: rec.Held && rec.Status == persistence.StatusInProgress, Valid: true},
		}
	)
	if len(response) > 0 {
		w.data = response
	}
	inProgress := inProgressMillis(rec.InProgressExpiresAt)
	if ms, ok := inProgress.(int64); ok {
		w.inProgress = pgtype.Int8{Int64: ms, Valid: true}
	}
	err = db.QueryRow(ctx, s.updateSQL,
		rec.Key, string(rec.Status), w.expiration.Int64, inProgress,
		nullBytes(response), nullText(w.errorType.String), nullText(w.errorMessage.String), omitted,
		rec.Token, w.held.Bool,
	).Scan(&applied, &w.validation, &done)
	switch {
	case err != nil:
		return nil, s.opError(op, rec.Key, err)
	case applied && tooLarge:
		return w.record(rec.Key), persistence.ErrResponseOmitted
	case applied:
		return w.record(rec.Key), nil
	case done.Valid && done.Bool && rec.Status != persistence.StatusCompleted:
		return nil, nil // a later renewal applied
	case done.Valid && done.Bool && rec.Status == persistence.StatusCompleted:
		if inTx {
			return nil, fmt.Errorf("persistence/postgres: %s %q: %w", op, rec.Key, ErrAlreadyCompleted)
		}
		if tooLarge {
			return nil, persistence.ErrResponseOmitted
		}
		return nil, nil
	}
	return nil, fmt.Errorf("persistence/postgres: %s %q: %w", op, rec.Key, persistence.ErrFenced)
}

// Delete implements persistence.Store with one statement (see deleteSQL):
// a DELETE conditioned on the record being the caller's own reservation,
// its token and in progress. It succeeds when it deleted the record or
// there is none, and returns an error wrapping persistence.ErrFenced for
// any other record. Other failures are returned wrapped. A release that
// applies is followed by NOTIFY, as a completion is.
func (s *Store) Delete(ctx context.Context, key, token string) error {
	var deleted, held bool
	if err := s.db.QueryRow(ctx, s.deleteSQL, key, token).Scan(&deleted, &held); err != nil {
		return s.opError("delete", key, err)
	}
	if deleted {
		s.notify(ctx, key, nil)
	}
	if deleted || !held {
		return nil
	}
	return fmt.Errorf("persistence/postgres: delete %q: %w", key, persistence.ErrFenced)
}

// opError wraps an error of operation op on key, so that errors.Is and
// errors.As see the cause (a *pgconn.PgError, context.DeadlineExceeded).
func (s *Store) opError(op, key string, err error) error {
	return fmt.Errorf("persistence/postgres: %s %q in table %s: %w", op, key, s.name, err)
}

// row is a record's columns as a statement returns them, in the order of
// getSQL.
type row struct {
	status       pgtype.Text
	expiration   pgtype.Int8
	inProgress   pgtype.Int8
	validation   pgtype.Text
	data         []byte
	token        pgtype.Text
	errorType    pgtype.Text
	errorMessage pgtype.Text
	omitted      pgtype.Bool
	held         pgtype.Bool
}

func (r *row) dest() []any {
	return []any{&r.status, &r.expiration, &r.inProgress, &r.validation, &r.data, &r.token, &r.errorType, &r.errorMessage, &r.omitted, &r.held}
}

func (r *row) record(key string) *persistence.Record {
	rec := &persistence.Record{
		Key:             key,
		Status:          persistence.Status(r.status.String),
		ExpiresAt:       time.Unix(r.expiration.Int64, 0),
		PayloadHash:     r.validation.String,
		Token:           r.token.String,
		Response:        r.data,
		ResponseOmitted: r.omitted.Bool,
		Held:            r.held.Bool,
		ErrorType:       r.errorType.String,
		ErrorMessage:    r.errorMessage.String,
	}
	if r.inProgress.Valid {
		rec.InProgressExpiresAt = time.UnixMilli(r.inProgress.Int64)
	}
	return rec
}

// inProgressMillis returns t in epoch milliseconds, rounded up, or nil
// (NULL) for the zero time.
func inProgressMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return epoch.CeilMillis(t)
}

// nullText returns s, or nil (NULL) when it is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBytes returns b, or nil (NULL) when it is empty.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// clean returns s as a text column can hold it: invalid UTF-8 and NUL
// bytes, which PostgreSQL refuses in text, replaced by U+FFFD. Only the
// recorded error's type and message can have them (a handler's error
// text); the library's keys, tokens and hashes are ASCII.
func clean(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
