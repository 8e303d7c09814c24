// Package postgres is a [persistence.Store] backed by a PostgreSQL table,
// through github.com/jackc/pgx/v5. It is for services whose data is in
// PostgreSQL already. The records sit next to that data, and there is no
// other service to run.
//
// It is a module of its own (github.com/retrysafe/retrysafe/persistence/postgres),
// so that the library's module does not require pgx.
//
// # Connection
//
// You bring the pool, with its address, TLS, credentials, sizes and
// timeouts. The Store only runs statements on it:
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil { ... }
//	store, err := postgres.New(pool, "idempotency")
//
// Any [DB] works: *pgxpool.Pool, or a *pgx.Conn in a program that makes
// one call at a time. Each statement is a transaction of its own, at the
// session's isolation level. That level must be READ COMMITTED,
// PostgreSQL's default (see Isolation). Statements are bounded by the
// context of the call (on Lambda, the invocation's deadline). Set
// statement_timeout on the pool's sessions as well.
//
// Behind PgBouncer in transaction mode, configure pgx for it, as for any
// pgx program. Set QueryExecModeExec or QueryExecModeSimpleProtocol in the
// connection's DefaultQueryExecMode.
//
// # Statements
//
// Each Store method runs one statement. A completion and a release add
// NOTIFY. Each statement is one round trip once the connection has
// prepared it. pgx caches prepared statements per connection. The first
// use of each on a connection costs one more round trip.
//
//   - Put runs INSERT ... ON CONFLICT (id) DO UPDATE ... WHERE the
//     existing record is not live (docs/protocol.md, reserve). Not live
//     means expiration < now, or status INPROGRESS and
//     in_progress_expiration < now. When the existing record is live, the
//     same statement reads it, so that a conflict carries it. That is a
//     locking read in a second CTE, after the insert.
//   - Get runs a SELECT of the row.
//   - Update runs an UPDATE fenced on owner_token and status INPROGRESS
//     (renew, complete, record an error). When it does not apply, the
//     same statement reads whether the record is the caller's own
//     completed record. A completion then succeeds without writing
//     (done). Any other record, or none, is [persistence.ErrFenced].
//   - Delete runs a DELETE fenced the same way (release). When there is
//     no record, it succeeds (done). Any other record is
//     [persistence.ErrFenced].
//   - DeleteRecord (the operator's release) runs a DELETE. It is
//     conditioned on the status, token, expiry and in-progress expiry the
//     operator read.
//   - List and ListStuck run a SELECT per page. List reads the primary
//     key, and ListStuck the partial index of in-progress records.
//   - Sweep runs a DELETE of up to a limit of expired records.
//   - CompleteTx runs Update's statement, in the caller's transaction. It
//     is the completion of a transaction that BeginTx began (see
//     Transactions).
//
// A completion and a release that apply are followed by NOTIFY, a
// statement of its own (see Waiting). With package idempotency, a first
// call therefore costs 3 statements (Put, Update, NOTIFY). A replay costs
// 1 (the failed Put, which returns the record). A handler error costs 3
// (Put, Delete, NOTIFY). With memory.NewCache in front of the store, a
// replay in the same process costs none.
//
// # Waiting
//
// The Store wakes the calls that wait for a key (idempotency.WithWait)
// when its holder completes or releases it. [Store.Watch] implements
// [persistence.Notifier]. After the completion or the release, the Store
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
// attributes, with the same units. They are in schema.sql, which [Schema]
// holds:
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
// "C", so keys compare as bytes. That is faster than a language's
// collation. It also makes the keys with one prefix a range of the
// primary key's index (List).
//
// Two indexes serve the operator's reads. One is on expiration, for
// Sweep. The other is a partial one on (in_progress_expiration, id) of the
// in-progress records, for ListStuck. It is small, since completed
// records leave it. Its predicate names in_progress_expiration, which the
// fenced writes do not. So their plans keep to the primary key.
//
// [CreateTable] creates the table and its indexes unless they exist. For a
// migration tool, take [Schema], replacing the name "idempotency" with
// yours. The store needs no other object: no function, trigger or
// extension.
//
// # Isolation
//
// Every statement runs in a transaction of its own, at READ COMMITTED.
// The reservation relies on what INSERT ... ON CONFLICT DO UPDATE does at
// that level:
//
//   - When the key exists, it locks the row's latest committed version. It
//     evaluates its WHERE on that version, even when it is newer than the
//     statement's snapshot.
//   - When another transaction has inserted the key and not committed yet,
//     it waits for it. It then does the same, or inserts if the other
//     rolled back.
//
// So of concurrent reservations of one key, exactly one applies. The
// others each find the winner's record, committed, and live. The same
// holds for concurrent takeovers of a lapsed record. The first locks the
// row and takes it over. The others wait for the row, then find the new
// record, which is live.
//
// A refused write reads the record to say why, in the same statement. It
// uses a locking read (FOR SHARE) that runs after the write. That read
// follows the row to its latest committed version, the one the write's
// condition saw. A plain read would return the version of the statement's
// snapshot. A transaction that committed while the write waited may have
// changed it. One case escapes this. A reservation that waited for a
// concurrent reservation of a new key cannot read the winner's row. Its
// snapshot does not have that row at all. It returns a
// [*persistence.ConflictError] without Existing, and package idempotency
// reads the record with Get.
//
// Every write locks the record's row. The reservation's ON CONFLICT does
// too, even when it conflicts. So writes of one key, replays included,
// run one after the other, each for the length of its statement. Writes
// of different keys do not wait for each other.
//
// At REPEATABLE READ or SERIALIZABLE, the statements stay correct. But a
// write that meets a row changed after its snapshot fails with a
// serialization failure (SQLSTATE 40001). It does not wait and check
// again. A race that READ COMMITTED settles thus becomes an error. Package
// idempotency reports it as a store error, without running the handler
// for a reservation. Leave default_transaction_isolation at its default
// for the store's sessions.
//
// # Clock
//
// The store decides whether a record still holds its key with the time
// the caller passes to Put. So does [persistence.Record.Live], and so do
// the other stores (docs/protocol.md, The clock). The conditions are
// these, with now rounded up so that the comparisons are exactly Live's:
//
//   - expiration < now, in seconds
//   - in_progress_expiration < now, in milliseconds
//
// PostgreSQL's now() is not used, for two reasons. First, it is the
// server's clock. The store would decide expiry differently from the
// library, which checks the record a conflict returns with Live and the
// caller's clock. The server's clock may hold a record live when the
// caller's does not. That would be a conflict the library retries until
// it gives up. The store would also differ from the other stores, for
// which the protocol and its model are written. Second, now() is the time
// the transaction started. In CompleteTx's transaction, that can be long
// before the completion. The protocol then holds as for the other stores.
// It holds for callers whose clocks agree within the margin of their
// deadlines and leases.
//
// # Sweep
//
// PostgreSQL has no TTL. Expired rows stay until something deletes them.
// They do no harm to the protocol, but they take space. An expired record
// is as good as absent, and the next reservation of its key takes it
// over. Run [Store.Sweep] on a schedule, for example every minute:
//
//	for {
//		n, err := store.Sweep(ctx, time.Now(), 1000)
//		if err != nil || n < 1000 {
//			break
//		}
//	}
//
// Each call deletes up to its limit of records expired at its now, in one
// short transaction. It skips rows that a write holds. In-progress records
// past their in-progress expiry but not their expiry stay. Their
// invocation may still complete them. Autovacuum reclaims the space of
// deleted rows as for any table.
//
// # Transactions
//
// With idempotency.WithTransactions, a handler's own writes in the
// database of the records commit with the completion of its key. They
// commit in one transaction, or not at all. So a side effect there (a
// ledger row, an order, a balance) happens exactly once. That holds even
// when the handler dies between its write and the completion. The Store
// is a [persistence.TxStore]. The library begins the transaction
// (BeginTx) after the key is reserved. The handler writes in it. The
// library then completes the key in it and commits it:
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
// completion, and COMMIT. The handler's statements go between.
//
// The reservation stays outside the transaction. It commits before the
// handler runs, so that a concurrent duplicate finds it at once. The
// duplicate is then answered in progress. Inside the transaction, the
// reservation would make the duplicate wait for the handler's
// transaction. Or the duplicate would not see its insert yet, and insert
// a reservation of its own. The lease's renewals
// update the reservation beside the transaction too. The transaction
// therefore needs a connection of its own. Give [New] a *pgxpool.Pool. It
// needs at least two connections for each call that may run at once. One
// is its transaction's, and one is for the store's statements.
//
// BeginTx begins the transaction at READ COMMITTED, whatever the
// session's default. The completion updates the record that the renewals
// changed while the handler ran. At REPEATABLE READ or SERIALIZABLE, it
// would fail with a serialization failure after any renewal (see
// CompleteTx). The handler's statements run at READ COMMITTED too. One
// that must not see a row change under it locks the row (SELECT ... FOR
// UPDATE).
//
// The transaction's Commit runs the completion (CompleteTx), then COMMIT.
// It says what was written, as [persistence.Tx] does, for package
// idempotency to act on (docs/protocol.md, What a commit error proves):
//
//   - Both succeed. Commit returns nil, and the call returns its result.
//   - The record is not the caller's reservation. Another call took the
//     key over after its in-progress expiry, or it was released. The
//     transaction is rolled back, and Commit returns an error wrapping
//     [persistence.ErrFenced]. Nothing was written. The call fails with a
//     *idempotency.CommitError that matches it.
//   - The record is the caller's own completed record. An earlier attempt
//     committed. The transaction is rolled back, and Commit returns nil
//     (docs/protocol.md, commit, done).
//   - The completion's statement fails, whatever the failure. It may be
//     an error with any SQLSTATE, or a transaction that a failed statement
//     of the handler aborted, or the connection lost. COMMIT was not sent,
//     and the transaction cannot commit any more. The server rolls back
//     that of a connection that ends. Commit returns a
//     [*persistence.CommitCanceledError] wrapping the error. Nothing was
//     written. The library releases the key, and the call fails with a
//     *idempotency.CommitError that is not Unknown.
//   - COMMIT is answered with an ERROR. That may be a deferred constraint
//     violated, a serialization failure (40001), or a deadlock (40P01).
//     PostgreSQL rolled the transaction back. Commit returns the same
//     *persistence.CommitCanceledError.
//   - COMMIT gets no answer (the connection lost, a timeout), or a FATAL
//     one. A FATAL answer may come after the commit is durable. A session
//     that ended while COMMIT waited for a synchronous standby gives one.
//     The outcome is unknown, and Commit returns the error as it is. Both
//     outcomes happen. When a context ends during COMMIT, pgx closes the
//     connection and sends the server a cancel request. The request may
//     arrive while COMMIT still waits (on a lock, in a deferred trigger).
//     Then the server rolls back. If it does not, the server commits. The
//     key stays reserved until its in-progress expiry. The call fails with
//     a *idempotency.CommitError that is Unknown. A retry after the expiry
//     finds the completed record if the commit happened. It runs the
//     handler again if it did not. That is exactly once either way.
//
// The handler's own statement errors are the handler's. Examples are a
// unique violation of its INSERT, and a serialization failure (SQLSTATE
// 40001) or a deadlock (40P01) of its UPDATE. The connection lost while it
// runs is one too. Its statement fails, and the transaction with it. The
// handler returns the error, and its transaction is rolled back. Its key
// is released, or recorded for an error the handler marks
// idempotency.Permanent. A handler that swallows the error and returns a
// result gets a canceled commit. The completion finds the transaction
// aborted.
//
// The library does not retry a serialization failure or a deadlock
// itself, at a statement or at COMMIT. A retry must run the handler
// again, with fresh reads. The handler may have done things outside the
// database, such as a request to a payment provider or an email. The
// library cannot roll those back, and must not repeat them unseen. The
// call fails with a *idempotency.CommitError that is not Unknown. The key
// is released, and the client's retry runs the handler again, in a new
// transaction. The HTTP adapters answer it 503 not-committed, with
// Retry-After (docs/problems.md). The batch handlers report the record as
// failed, to be delivered again.
//
// A handler may run past its in-progress expiry, while another call takes
// its key over and completes it. That handler commits nothing. Its
// completion is refused, and its writes are rolled back with it. The
// completion is fenced on the owner token and the in-progress status,
// read at its latest committed version. A call that takes over a key
// while a late completion holds the record's row waits for that
// transaction. It finds the key completed if that transaction committed.
// The handler's writes may have a unique key, such as the order's ID. The
// write of the call that took over then waits the same way for the late
// handler's transaction. That transaction is rolled back, and the write
// goes on.
//
// Aurora DSQL is PostgreSQL-compatible, with optimistic concurrency
// control. It has one isolation level, snapshot isolation, with its
// snapshot taken at BEGIN. Its transactions take no row locks. Conflicts
// are found at COMMIT, which answers ERROR with SQLSTATE 40001 (OC000,
// OC001). The commit is then canceled, as above. The key is released, and
// the client's retry runs the handler again. A takeover that commits
// while a late handler's transaction runs makes that COMMIT fail so.
// Nothing of that transaction is written. A renewal of the lease committed
// while the handler ran makes it fail too. So on Aurora DSQL, keep handlers
// shorter than a third of their lease (idempotency.WithLease). Or give
// them a deadline (Lambda's), which needs no renewal. The store is
// developed and tested on PostgreSQL, not on Aurora DSQL. Aurora DSQL
// lacks some of what it uses. For one, CreateTable's schema declares a
// COLLATE that Aurora DSQL's CREATE TABLE does not take.
//
// [Store.CompleteTx] is the completion alone, for a program that runs the
// transaction itself. Commit is CompleteTx and COMMIT, with the outcomes
// above.
//
// # Privileges
//
// The store's role needs SELECT, INSERT, UPDATE and DELETE on the table.
// It needs UPDATE also for the locking reads. It needs USAGE on the
// table's schema:
//
//	GRANT USAGE ON SCHEMA app TO idempotency_writer;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON app.idempotency TO idempotency_writer;
//
// CreateTable additionally needs CREATE on the schema. An operator's role
// needs SELECT for Get, List and ListStuck. DeleteRecord and Sweep need
// SELECT, DELETE and UPDATE, for their row locks (FOR SHARE, FOR UPDATE).
//
// # Responses
//
// The response is stored as it is, in the data column (bytea, up to 1
// GB). So the store never needs to omit one. [Options.MaxResponseSize]
// sets a smaller limit if you want one. The recorded error's type and
// message are text. Bytes that PostgreSQL's text cannot hold (invalid
// UTF-8, NUL) are stored as U+FFFD.
//
// # Errors
//
// The operations return these errors of package persistence:
//
//   - Put returns a [*persistence.ConflictError] only when a live record
//     holds the key.
//   - Update and Delete return errors wrapping [persistence.ErrFenced]
//     only when the record is not the caller's reservation.
//   - Get returns [persistence.ErrNotFound] only when there is no record.
//   - Update returns [persistence.ErrResponseOmitted] only when
//     [Options.MaxResponseSize] made it drop the response.
//
// Every other failure is returned as an error that starts with
// "persistence/postgres: " and wraps the cause. So errors.Is and errors.As
// see it. The cause is a *pgconn.PgError from the server,
// context.DeadlineExceeded, or a network error. None of them is ever
// reported as a conflict or as fenced.
//
// A write whose reply was lost may have committed. The protocol's table
// (docs/protocol.md) decides what its repetition does:
//
//   - A reservation finds its own record. That is a conflict with the
//     caller's token, which the library takes as its own.
//   - A completion finds its own completed record (done).
//   - A release finds nothing (done).
package postgres
