package postgres

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/epoch"
	"github.com/retrysafe/retrysafe/persistence"
)

// The listing statements read pages in the order of the primary key, the
// keys' bytes (COLLATE "C", the id column's collation in Schema, which
// the explicit COLLATE matches so that the primary key's index serves
// them), each page after the last key of the one before, without the
// response column.
const (
	listColumns = `id, status, expiration, in_progress_expiration, validation, NULL::bytea, owner_token, error_type, error_message, response_omitted, held`

	// listSQL: every key after $1 that starts with $2.
	listSQL = `SELECT ` + listColumns + ` FROM {t}
WHERE id COLLATE "C" > $1 AND starts_with(id, $2)
ORDER BY id COLLATE "C" LIMIT $3`

	// listRangeSQL: the keys after $1 from $2 to before $3, the range of
	// the keys that start with $2, which the index reads alone.
	listRangeSQL = `SELECT ` + listColumns + ` FROM {t}
WHERE id COLLATE "C" > $1 AND id COLLATE "C" >= $2 AND id COLLATE "C" < $3 AND starts_with(id, $2)
ORDER BY id COLLATE "C" LIMIT $4`

	// listStuckSQL: the in-progress records past their in-progress expiry
	// at $1 (epoch milliseconds, rounded up), after ($2, $3), in the
	// order of the partial index on (in_progress_expiration, id).
	listStuckSQL = `SELECT ` + listColumns + ` FROM {t}
WHERE status = 'INPROGRESS' AND in_progress_expiration < $1 AND (in_progress_expiration, id) > ($2, $3)
ORDER BY in_progress_expiration, id LIMIT $4`
)

// defaultPageSize is the page size of List and ListStuck when they are
// given 0.
const defaultPageSize = 1000

// List reads the store's records whose key starts with keyPrefix, for
// operators' tools. It reads a page of pageSize records at a time. A
// pageSize of 0 means 1000. The records come in the order of their keys'
// bytes. List calls page with the records of each page, until there are
// no more or page returns an error, which List returns.
//
// Each page is one SELECT, which reads the primary key's index from the
// last key of the page before. With a key prefix, it reads only the range
// of the keys that start with it. Pages are read at different times. A
// record written between two pages is listed if its key comes after the
// first page's last.
//
// The records come without their responses. The statement leaves them out
// so that listing does not transfer them. [Store.Get] reads a whole
// record.
func (s *Store) List(ctx context.Context, keyPrefix string, pageSize int, page func([]*persistence.Record) error) error {
	if pageSize < 0 {
		return fmt.Errorf("persistence/postgres: List: negative page size %d", pageSize)
	}
	if pageSize == 0 {
		pageSize = defaultPageSize
	}
	hi, bounded := prefixEnd(keyPrefix)
	after := ""
	for {
		var args []any
		sql := s.listSQL
		if bounded {
			sql, args = s.listRangeSQL, []any{after, keyPrefix, hi, pageSize}
		} else {
			args = []any{after, keyPrefix, pageSize}
		}
		recs, err := s.listPage(ctx, sql, args)
		if err != nil {
			return fmt.Errorf("persistence/postgres: List: %w", err)
		}
		if len(recs) > 0 {
			if err := page(recs); err != nil {
				return err
			}
		}
		if len(recs) < pageSize {
			return nil
		}
		after = recs[len(recs)-1].Key
	}
}

// ListStuck reads the stuck records. They are in progress past their
// in-progress expiry at now. Their invocation crashed or timed out. The
// next retry with their key runs its handler again. ListStuck
// reads them a page of pageSize records at a time (0 means 1000), in the
// order of their in-progress expiry. It calls page with each, as List
// does.
//
// Each page is one SELECT on the partial index of in-progress records. So
// it reads the stuck records only, however many completed ones the table
// holds.
func (s *Store) ListStuck(ctx context.Context, now time.Time, pageSize int, page func([]*persistence.Record) error) error {
	if pageSize < 0 {
		return fmt.Errorf("persistence/postgres: ListStuck: negative page size %d", pageSize)
	}
	if pageSize == 0 {
		pageSize = defaultPageSize
	}
	var (
		afterMillis int64 = -1 << 63
		afterKey    string
	)
	for {
		recs, err := s.listPage(ctx, s.listStuckSQL, []any{epoch.CeilMillis(now), afterMillis, afterKey, pageSize})
		if err != nil {
			return fmt.Errorf("persistence/postgres: ListStuck: %w", err)
		}
		if len(recs) > 0 {
			if err := page(recs); err != nil {
				return err
			}
		}
		if len(recs) < pageSize {
			return nil
		}
		last := recs[len(recs)-1]
		afterMillis, afterKey = last.InProgressExpiresAt.UnixMilli(), last.Key
	}
}

// listPage runs one page's statement.
func (s *Store) listPage(ctx context.Context, sql string, args []any) ([]*persistence.Record, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var (
		key string
		h   row
	)
	dest := append([]any{&key}, h.dest()...)
	var recs []*persistence.Record
	_, err = pgx.ForEachRow(rows, dest, func() error {
		recs = append(recs, h.record(key))
		return nil
	})
	return recs, err
}

// prefixEnd returns the least string greater than every string that
// starts with prefix, in the order of their bytes, and true; or false
// when there is none (an empty prefix, or one of U+10FFFF only). It is
// valid UTF-8, as a text parameter must be: the prefix up to its last
// rune that can be incremented, incremented (past the surrogates, which
// UTF-8 cannot encode). UTF-8's byte order is the code points' order, so
// every string with the prefix is less than it.
func prefixEnd(prefix string) (string, bool) {
	for i := len(prefix); i > 0; {
		r, size := utf8.DecodeLastRuneInString(prefix[:i])
		i -= size
		if r == utf8.RuneError && size == 1 {
			return "", false // not UTF-8: no range, the filter alone
		}
		if r == utf8.MaxRune {
			continue
		}
		next := r + 1
		if next == 0xD800 {
			next = 0xE000
		}
		return prefix[:i] + string(next), true
	}
	return "", false
}
