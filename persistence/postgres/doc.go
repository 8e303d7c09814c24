// Package postgres is a persistence.Store backed by a PostgreSQL table,
// through github.com/jackc/pgx/v5: for services whose data is in
// PostgreSQL already, with the records next to it and no other service to
// run.
//
// It is a module of its own (github.com/retrysafe/retrysafe/persistence/postgres),
// so that the library's module does not require pgx.
//
// # Connection
//
// You bring the pool, with its address, TLS, credentials, sizes and
// timeouts; the Store only runs statements on it:
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil { ... }
//	store, err := postgres.New(pool, "idempotency")
//
// Any DB works: *pgxpool.Pool, or a *pgx.Conn in a program that makes one
// call at a time. Each statement is a transaction of its own, at the
// session's isolation level, which must be READ COMMITTED, PostgreSQL's
// default (see Isolation). Statements are bounded by the context of the
// call (on Lambda, the invocation's deadline); set statement_timeout on
// the pool's sessions as well.
//
// Behind PgBouncer in transaction mode, configure pgx for it
// (QueryExecModeExec or QueryExecModeSimpleProtocol in the connection's
// DefaultQueryExecMode), as for any pgx program.
//
// # Statements
//
// Each Store method runs exactly one statement, one round trip once the
// connection has prepared it (pgx caches prepared statements per
// connection; the first use of each on a connection costs one more round
// trip):
//
//   - Put: INSERT ... ON CONFLICT (id) DO UPDATE ... WHERE the existing
//     record is not live (docs/protocol.md, reserve): expiration < now,
//     or status INPROGRESS and in_progress_expiration < now. When the
//     existing record is live, the same statement reads it (a locking
//     read in a second CTE, after the insert), so that a conflict carries
//     it.
//   - Get: a SELECT of the row.
//   - Update: an UPDATE fenced on owner_token and status INPROGRESS
//     (renew, complete, record an error). When it does not apply, the
//     same statement reads whether the record is the caller's own
//     completed record: a completion then succeeds without writing
//     (done); any other record, or none, is persistence.ErrFenced.
//   - Delete: a DELETE fenced the same way (release). When there is no
//     record, it succeeds (done); any other record is persistence.ErrFenced.
//   - DeleteRecord (the operator's release): a DELETE conditioned on the
//     status, token, expiry and in-progress expiry the operator read.
//   - List and ListStuck: a SELECT per page, on the primary key and on
//     the partial index of in-progress records.
//   - Sweep: a DELETE of up to a limit of expired records.
//   - CompleteTx: Update's statement, in the caller's transaction.
//
// With package idempotency, a first call therefore costs 2 statements
// (Put, Update), a replay 1 (the failed Put, which returns the record),
// and a handler error 2 (Put, Delete). With memory.NewCache in front of
// the store, a replay in the same process costs none.
//
// # Table
//
// A record is one row. The columns are named as the other stores'
// attributes, with the same units (schema.sql, which Schema holds):
//
//	id                     text COLLATE "C" PRIMARY KEY   the record's key
//	status                 text NOT NULL                  INPROGRESS or COMPLETED
//	expiration             bigint NOT NULL                ExpiresAt, epoch seconds
//	in_progress_expiration bigint                         InProgressExpiresAt, epoch milliseconds rounded up (NULL if none)
//	validation             text                           the payload hash (NULL if empty)
//	data                   bytea                          the response, as it is (NULL if empty)
//	owner_token            text NOT NULL                  the token of the invocation that wrote the record
//	error_type             text                           a recorded handler error's type (NULL if none)
//	error_message          text                           its message (NULL if none)
//	response_omitted       boolean NOT NULL               the response was too large to keep
//
// Read the times with to_timestamp(expiration) and
// to_timestamp(in_progress_expiration / 1000.0). The key's collation is
// "C": keys compare as bytes, which is faster than a language's
// collation, and makes the keys with one prefix a range of the primary
// key's index (List). Two indexes serve the operator's reads: one on
// expiration for Sweep, and a partial one on (in_progress_expiration, id)
// of the in-progress records for ListStuck, small since completed records
// leave it. Its predicate names in_progress_expiration, which the fenced
// writes do not, so that their plans keep to the primary key.
//
// CreateTable creates the table and its indexes unless they exist; for a
// migration tool, take Schema (replacing the name "idempotency" with
// yours). The store needs no other object: no function, trigger or
// extension.
//
// # Isolation
//
// Every statement runs in a transaction of its own, at READ COMMITTED.
// The reservation relies on what INSERT ... ON CONFLICT DO UPDATE does at
// that level: when the key exists, it locks the row's latest committed
// version, and evaluates its WHERE on it, even when that version is newer
// than the statement's snapshot; when another transaction has inserted
// the key and not committed yet, it waits for it, and then does the same
// (or inserts, if the other rolled back). So of concurrent reservations of
// one key, exactly one applies: the others each find the winner's record,
// committed, and live. The same holds for concurrent takeovers of a
// lapsed record: the first locks the row and takes it over; the others
// wait for the row, then find the new record, which is live.
//
// A refused write reads the record to say why, in the same statement,
// with a locking read (FOR SHARE) that runs after the write: it follows
// the row to its latest committed version, the one the write's condition
// saw, where a plain read would return the version of the statement's
// snapshot, which a transaction that committed while the write waited may
// have changed. One case escapes it: a reservation that waited for a
// concurrent reservation of a new key cannot read the winner's row, which
// its snapshot does not have at all; it returns a *persistence.ConflictError
// without Existing, and package idempotency reads the record with Get.
//
// Every write locks the record's row (the reservation's ON CONFLICT
// does, even when it conflicts), so writes of one key, replays included,
// run one after the other, each for the length of its statement. Writes
// of different keys do not wait for each other.
//
// At REPEATABLE READ or SERIALIZABLE, the statements stay correct, but a
// write that meets a row changed after its snapshot fails with a
// serialization failure (SQLSTATE 40001) instead of waiting and
// re-checking: a race that READ COMMITTED settles becomes an error, which
// package idempotency reports as a store error (without running the
// handler, for a reservation). Leave default_transaction_isolation at its
// default for the store's sessions.
//
// # Clock
//
// Whether a record still holds its key is decided with the time the
// caller passes to Put, as persistence.Record.Live decides it and as the
// other stores do (docs/protocol.md, The clock): expiration < now in
// seconds, in_progress_expiration < now in milliseconds, now rounded up
// so that the comparisons are exactly Live's. PostgreSQL's now() is not
// used, for two reasons. It is the server's clock: the store would decide
// expiry differently from the library, which checks the record a
// conflict returns with Live and the caller's clock (a record that the
// server's clock holds live and the caller's does not would be a conflict
// the library retries until it gives up), and differently from the other
// stores, for which the protocol and its model are written. And it is the
// time the transaction started, which in CompleteTx's transaction can be
// long before the completion. The protocol then holds as for the other
// stores: for callers whose clocks agree within the margin of their
// deadlines and leases.
//
// # Sweep
//
// PostgreSQL has no TTL: expired rows stay until something deletes them.
// They do no harm to the protocol (an expired record is as good as
// absent, and the next reservation of its key takes it over), but they
// take space. Run Store.Sweep on a schedule, for example every minute:
//
//	for {
//		n, err := store.Sweep(ctx, time.Now(), 1000)
//		if err != nil || n < 1000 {
//			break
//		}
//	}
//
// Each call deletes up to its limit of records expired at its now, in one
// short transaction, skipping rows that a write holds; in-progress
// records past their in-progress expiry but not their expiry stay, since
// their invocation may still complete them. Autovacuum reclaims the space
// of deleted rows as for any table.
//
// # Same-transaction completion
//
// Store.CompleteTx runs the completion in a transaction of the caller's,
// with the handler's own writes in the same database, so that the side
// effect and the completion commit together or not at all. It is a
// building block: the library's transactional mode for PostgreSQL is
// built on it.
//
// # Privileges
//
// The store's role needs, on the table, SELECT, INSERT, UPDATE and
// DELETE (UPDATE also for the locking reads), and USAGE on its schema:
//
//	GRANT USAGE ON SCHEMA app TO idempotency_writer;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON app.idempotency TO idempotency_writer;
//
// CreateTable additionally needs CREATE on the schema. An operator's role
// needs SELECT for Get, List and ListStuck; DeleteRecord and Sweep need
// SELECT, DELETE and UPDATE (their row locks: FOR SHARE, FOR UPDATE).
//
// # Responses
//
// The response is stored as it is, in the data column (bytea, up to 1
// GB), so the store never needs to omit one; Options.MaxResponseSize sets
// a smaller limit if you want one. The recorded error's type and message
// are text: bytes that PostgreSQL's text cannot hold (invalid UTF-8, NUL)
// are stored as U+FFFD.
//
// # Errors
//
// Put returns a *persistence.ConflictError only when a live record holds
// the key; Update and Delete return errors wrapping persistence.ErrFenced
// only when the record is not the caller's reservation; Get returns
// persistence.ErrNotFound only when there is no record; Update returns
// persistence.ErrResponseOmitted only when Options.MaxResponseSize made it
// drop the response. Every other failure is returned as an error that
// starts with "persistence/postgres: " and wraps the cause, so errors.Is
// and errors.As see it: a *pgconn.PgError from the server,
// context.DeadlineExceeded, a network error. None of them is ever
// reported as a conflict or as fenced.
//
// A write whose reply was lost may have committed. The protocol's table
// (docs/protocol.md) decides what its repetition does: a reservation
// finds its own record (a conflict with the caller's token, which the
// library takes as its own), a completion finds its own completed record
// (done), a release finds nothing (done).
package postgres
