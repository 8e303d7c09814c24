package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/internal/epoch"
)

// sweepSQL deletes at most $2 records expired at $1 (epoch seconds,
// rounded up). Rows that another transaction holds (a reservation taking
// the key over, a read of a refused write) are skipped, not waited for;
// the DELETE checks the expiry again on the row it deletes.
const sweepSQL = `DELETE FROM {t} WHERE id IN (
	SELECT id FROM {t} WHERE expiration < $1 LIMIT $2 FOR UPDATE SKIP LOCKED
) AND expiration < $1`

// Sweep deletes up to limit records that have expired at now (their
// expiry is before now), and returns how many it deleted. PostgreSQL has
// no TTL: run Sweep on a schedule, with a limit that keeps each
// transaction short, and again while it deletes limit records.
//
// Deleting an expired record changes nothing for the library, which
// treats it as absent (docs/protocol.md, the states). Records in progress
// past their in-progress expiry but not their expiry are kept: their
// invocation may still complete them. now is the sweeper's clock; see the
// package documentation, Clock.
//
// It runs one statement, which uses the expiration index.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("persistence/postgres: Sweep: limit %d, want a positive number", limit)
	}
	tag, err := s.db.Exec(ctx, s.sweepSQL, epoch.CeilSeconds(now), limit)
	if err != nil {
		return 0, fmt.Errorf("persistence/postgres: sweep of table %s: %w", s.name, err)
	}
	return tag.RowsAffected(), nil
}
