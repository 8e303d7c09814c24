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
// Each Store method runs one statement. A completion and a release add
// NOTIFY. Each statement is one round trip once the
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
//   - CompleteTx: Update's statement, in the caller's transaction; the
//     completion of a transaction that BeginTx began (see Transactions).
//
// A completion and a release that apply are followed by NOTIFY, a
// statement of its own (see Waiting). With package idempotency, a first
// call therefore costs 3 statements (Put, Update, NOTIFY). A replay costs
// 1 (the failed Put, which returns the record). A handler error costs 3
// (Put, Delete, NOTIFY). With memory.NewCache in front of the store, a replay
// in the same process costs none.
//
// # Waiting
//
// The Store wakes the calls that wait for a key (idempotency.WithWait)
// when its holder completes or releases it: Store.Watch implements
// persistence.Notifier. After the completion or the release, the Store
// sends NOTIFY with the key on a channel of the table. It does so outside
// the completion's transaction. So completions do not queue for the
// server's notification lock at their commit. A Store listens for its
// waiting calls on one connection of its own, opened like its pool's. It
// closes it when none has waited for 30 seconds. A completion's
// notification carries the completed record when its payload stays under
// the server's 8000 bytes. A waiter woken by one answers from it. That is
// two statements for a wait under two seconds. A release's notification,
// or a larger record's, carries the key alone: its waiters read the
// record once more. Each two seconds more add a poll, which covers a lost
// notification. A wait survives a dropped connection and a restart of the
// server.
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
//	held                   boolean NOT NULL               a reservation that keeps its key when it lapses
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
// # Transactions
//
// With idempotency.WithTransactions, a handler's own writes in the
// database of the records commit with the completion of its key, in one
// transaction, or not at all: a side effect there (a ledger row, an
// order, a balance) happens exactly once, even when the handler dies
// between its write and the completion. The Store is a
// persistence.TxStore: the library begins the transaction (BeginTx)
// after the key is reserved, the handler writes in it, and the library
// completes the key in it and commits it:
//
//	pay := idempotency.Must(idempotency.Wrap(func(ctx context.Context, p payment) (receipt, error) {
//		tx, ok := postgres.Tx(ctx)
//		if !ok {
//			return receipt{}, errors.New("not wrapped with idempotency.WithTransactions")
//		}
//		_, err := tx.Exec(ctx, `INSERT INTO ledger (order_id, amount) VALUES ($1, $2)`, p.OrderID, p.Amount)
//		return receipt{OrderID: p.OrderID}, err
//	}, store, idempotency.WithKey("order_id"), idempotency.WithTransactions()))
//
// A call then costs 4 round trips: the reservation, BEGIN, the
// completion, and COMMIT; the handler's statements go between.
//
// The reservation stays outside the transaction: it commits before the
// handler runs, so that a concurrent duplicate finds it at once and is
// answered in progress, instead of waiting for the handler's transaction
// (or, its insert not yet visible, inserting a reservation of its own).
// The lease's renewals update the reservation beside the transaction
// too. The transaction therefore needs a connection of its own: give New
// a *pgxpool.Pool, with at least two connections for each call that may
// run at once (its transaction's, and one for the store's statements).
//
// BeginTx begins the transaction at READ COMMITTED, whatever the
// session's default, since the completion updates the record that the
// renewals changed while the handler ran: at REPEATABLE READ or
// SERIALIZABLE, it would fail with a serialization failure after any
// renewal (see CompleteTx). The handler's statements run at READ
// COMMITTED too; one that must not see a row change under it locks the
// row (SELECT ... FOR UPDATE).
//
// The transaction's Commit runs the completion (CompleteTx), then COMMIT,
// and says what was written, as persistence.Tx does, for package
// idempotency to act on (docs/protocol.md, What a commit error proves):
//
//   - Both succeed: nil. The call returns its result.
//   - The record is not the caller's reservation (another call took the
//     key over after its in-progress expiry, or it was released): the
//     transaction is rolled back, and Commit returns an error wrapping
//     persistence.ErrFenced. Nothing was written; the call fails with a
//     *idempotency.CommitError that matches it.
//   - The record is the caller's own completed record: an earlier
//     attempt committed. The transaction is rolled back, and Commit
//     returns nil (docs/protocol.md: commit, done).
//   - The completion's statement fails, whatever the failure (an error
//     with any SQLSTATE, a transaction that a failed statement of the
//     handler aborted, the connection lost): COMMIT was not sent, and
//     the transaction cannot commit any more; the server rolls back that
//     of a connection that ends. Commit returns a
//     *persistence.CommitCanceledError wrapping the error: nothing was
//     written. The library releases the key, and the call fails with a
//     *idempotency.CommitError that is not Unknown.
//   - COMMIT is answered with an ERROR (a deferred constraint violated,
//     a serialization failure, 40001, a deadlock, 40P01): PostgreSQL
//     rolled the transaction back. The same *persistence.CommitCanceledError.
//   - COMMIT gets no answer (the connection lost, a timeout), or a FATAL
//     one, which may come after the commit is durable (a session ended
//     while COMMIT waits for a synchronous standby): the outcome is
//     unknown, and Commit returns the error as it is. Both outcomes
//     happen. When a context ends during COMMIT, pgx closes the
//     connection and sends the server a cancel request. If the request
//     arrives while COMMIT still waits (on a lock, in a deferred
//     trigger), the server rolls back. If it does not, the server
//     commits. The key stays reserved until its in-progress expiry, and
//     the call fails with a *idempotency.CommitError that is Unknown: a
//     retry after the expiry finds the completed record if the commit
//     happened, and runs the handler again if it did not, exactly once
//     either way.
//
// The handler's own statement errors are the handler's: a unique
// violation of its INSERT, a serialization failure (SQLSTATE 40001) or a
// deadlock (40P01) of its UPDATE, the connection lost while it runs. Its
// statement fails, and the transaction with it; the handler returns the
// error, its transaction is rolled back, and its key released (or, for
// an error the handler marks idempotency.Permanent, recorded). A handler
// that swallows the error and returns a result gets a canceled commit:
// the completion finds the transaction aborted.
//
// The library does not retry a serialization failure or a deadlock
// itself, at a statement or at COMMIT: a retry must run the handler
// again, with fresh reads, and the handler may have done things outside
// the database (a request to a payment provider, an email) that the
// library cannot roll back and must not repeat unseen. The call fails
// with a *idempotency.CommitError that is not Unknown, the key is
// released, and the client's retry runs the handler again, in a new
// transaction. The HTTP adapters answer it 503 not-committed, with
// Retry-After (docs/problems.md); the batch handlers report the record
// as failed, to be delivered again.
//
// A handler that runs past its in-progress expiry, whose key another
// call took over and completed, commits nothing: its completion is
// refused (fenced on the owner token and the in-progress status, read
// at its latest committed version), and its writes are rolled back with
// it. A call that takes over a key while a late completion holds the
// record's row waits for that transaction, and finds the key completed
// if it committed. A unique key among the handler's writes (the order's
// ID) makes the write of the call that took over wait the same way for
// the late handler's transaction, which is rolled back: the write then
// goes on.
//
// On Aurora DSQL, which is PostgreSQL-compatible with optimistic
// concurrency control and one isolation level (snapshot isolation, its
// snapshot taken at BEGIN), transactions take no row locks and conflicts
// are found at COMMIT, which answers ERROR with SQLSTATE 40001 (OC000,
// OC001): the commit is canceled, as above, the key released, and the
// client's retry runs the handler again. A takeover that commits while a
// late handler's transaction runs makes that transaction's COMMIT fail
// so, and nothing of it is written. So does a renewal of the lease
// committed while the handler ran: there, keep handlers shorter than a
// third of their lease (idempotency.WithLease), or give them a deadline
// (Lambda's), which needs no renewal. The store is developed and tested
// on PostgreSQL, not on Aurora DSQL, which lacks some of what it uses
// (CreateTable's schema, for one, declares a COLLATE that Aurora DSQL's
// CREATE TABLE does not take).
//
// Store.CompleteTx is the completion alone, for a program that runs the
// transaction itself: Commit is CompleteTx and COMMIT, with the outcomes
// above.
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
