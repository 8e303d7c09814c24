// Package chaos is a randomized fault-injection harness for the library's
// promise: within a key's expiry window, the side effect runs at most once,
// and a client that keeps retrying with one key gets it done exactly once,
// with one consistent answer. docs/guarantees.md states the guarantee and
// its limits; this package tries to break it.
//
// # The model
//
// Clients drive keys, each its own, one after another. A client sends a
// request with its key and retries it, unchanged, until it gets a final
// answer (a response, or a permanent error), then replays it a few times,
// some after a pause: after *InProgressError it waits until the
// reservation's Until, after other failures it backs off. Some attempts
// are delivered twice at once.
//
// Each attempt is an invocation in one of several execution environments.
// An environment has its own store client (its own SDK or Redis client and
// connections), its own fault injection, its own clock (offset from true
// time by up to the skew bound: the time its reservations are made at),
// and, in some environments, the local cache (memory.NewCache). An
// invocation has a deadline, the Lambda function timeout, which the library
// records as the in-progress expiry; its context expires when the
// environment's own clock reaches the deadline, as on Lambda. In leased
// environments the deployments use idempotency.WithLease, with a lease
// shorter than the deadline and than much of the handlers' work there: a
// reservation holds the key for a lease at a time, and the invocation
// renews it while its handler works. A client gives up on an invocation at
// its deadline; the invocation may go on running (a late finisher) and try
// to complete.
//
// A Driver deploys the handler behind the layer under test and classifies
// what a client gets (Outcome): WrapDriver tests idempotency.Wrap,
// GuardDriver an idempotency.Guard, HTTPDriver the HTTP adapter
// (httpapi.WrapAPIGatewayV2), whose clients read status codes, problem
// details, Retry-After and Idempotent-Replayed. Each key goes through one
// driver; every run uses all three.
//
// # Faults
//
// Every choice is drawn from generators seeded by Config.Seed and the names
// of the client, key, attempt and invocation, so a seed reproduces the plan
// of a run: which invocation gets which fault, in which environment, with
// which clock. It does not reproduce goroutine scheduling or the stores'
// timing, so a failing seed usually, not always, fails again.
//
//   - store calls that fail before reaching the store, that reach it and lose
//     their reply, that are retried after a lost reply, and conflicts that
//     come without the existing record (faultstore, per invocation); with
//     a store's transaction, its BEGIN and its COMMIT too (a COMMIT that
//     is never sent, whose transaction is rolled back, or whose reply is
//     lost after it applied; faultstore.Store.BeginTx);
//   - writes applied late (Rates.LateWrite): a reservation, renewal,
//     completion, release or commit that times out for its sender at once
//     and reaches the store after a delay, often after the invocation
//     ended, as a request held by a proxy does: at the store interface
//     (faultstore.ApplyLate), and for DynamoDB also as an HTTP attempt held
//     back while the SDK's retry of it goes through (dynalite.ForwardedLate).
//     A renewal that reaches the store after its own completion is how a
//     completed key could be reopened. A commit of a store's transaction
//     is held on its open connection, and applies late only if the
//     connection lives that long;
//   - for DynamoDB, HTTP attempts that are refused, lose their reply or are
//     throttled (dynalite.Faults, under the SDK, which retries them), and
//     bursts of throttling of every request; on two servers, dynalite
//     (store "dynamodb"), where every conflict is read with a Get, and
//     DynamoDB Local (store "dynamodb-local"), where conflicts carry the
//     existing record from the failed write (ALL_OLD), as on DynamoDB;
//     and DynamoDB Local in transactional mode (store "dynamodb-local-tx",
//     below);
//   - for Redis, restarts that lose every record, and stalls (SIGSTOP) during
//     which requests time out but may still be applied later;
//   - for PostgreSQL (stores "postgres" and "postgres-tx", whose backends
//     are in the store's module, persistence/postgres, since this module
//     has no PostgreSQL driver), terminated connections
//     (pg_terminate_backend), stalls of every server process (SIGSTOP),
//     and crashes of the server followed by its recovery; none of them
//     loses what committed, so the checker allows no data loss there;
//   - handlers that fail (transient: the key is released), panic, are killed
//     before or after their side effect (from the kill on, none of the
//     invocation's store calls reaches the store and its client gets no
//     answer), overrun their deadline after the side effect, stall past it
//     and perform the side effect late, or fail after the side effect with
//     idempotency.Permanent;
//   - requests that the handler declines (a permanent error, recorded and
//     replayed), and responses too large for the store;
//   - clock skew between environments, within Config.SkewBound.
//
// # The checks
//
// The checker does not trust the library. It reads an append-only log of
// what happened to each key: the side effects the handler performed, the
// store calls the library made and what the store told it (recorded right
// under the library), the writes applied late (when each reached the
// store, and what the store said to it), the answers clients got, and when
// the store lost its data. Once every invocation of a key has ended, and
// every write it sent has reached the store, it checks:
//
//   - at most once: no two side effects of a key both had their result
//     stored (unless the store lost its data, or the key expired, between
//     them);
//   - every repetition explained: each side effect beyond the first is
//     matched to a distinct earlier side effect whose result was not stored
//     (killed after the side effect, completion write failed or fenced
//     out), or to a loss of the store's data; the report counts each limit;
//   - mutual exclusion: a reservation never took the key from another that
//     had not lapsed (by more than the skew bound, at the in-progress
//     expiry its last renewal that applied set), been released or been
//     replaced;
//   - no reopening: no renewal applied after its own invocation's
//     completion had been stored;
//   - answers: every final answer is one that a side effect of the key
//     produced, byte for byte (or ResponseTooLargeError where a response
//     was omitted); once a result is stored, every later answer is that
//     result;
//   - blocking: an in-progress answer names a reservation that some
//     invocation wrote and that had not lapsed, by more than the skew bound,
//     when the call began; so no key stays blocked longer than its
//     in-progress expiry;
//   - liveness: every key gets a final answer within Config.MaxAttempts;
//   - contract: the handler's context carries the key, every store call
//     carries the invocation's context values, and one request uses one
//     store key.
//
// # Transactional mode
//
// With a TransactionalBackend (stores "dynamodb-local-tx" and
// "postgres-tx"), every deployment uses idempotency.WithTransactions, and
// the handler's side effect is a write in a table of side effects that
// commits with the completion of its key, or not at all: on DynamoDB an
// item it stages (dynamodb.Stage), committed in one TransactWriteItems; on
// PostgreSQL a row it inserts in the transaction the library began for it
// (postgres.Tx), which the completion commits. Store faults reach commits
// too (faultstore's OpCommit, and for DynamoDB lost HTTP replies under the
// SDK's retries, with the transaction's ClientRequestToken); with a
// transaction, the stack passes BeginTx on, and the probe records its
// commit as it records a commit of staged writes (see store.go). The
// checker takes the side effects from what that table holds, not from the
// handler's log: a staged side effect that did not commit never happened.
// Declined requests and failures after the side effect are decisions,
// recorded without a commit. In this mode a repetition of a side effect
// that committed is a violation (exactly_once) whatever explains it,
// except the key's expiry, including kills between the side effect and the
// completion, failed or fenced completions and overruns; so is a side
// effect that committed although every commit of its invocation was fenced
// out or canceled, and a commit that succeeded without its side effect.
//
// # Running it
//
// Test is the body of TestChaos, here and in persistence/postgres: it runs
// the short mode with every `go test` (a few seconds per store), and the
// long mode with -chaos.long (`make chaos`: ten minutes per store, with
// the race detector). A Backend outside this module plugs in there, with
// the package's exported API. Every run logs its seed; a failure prints
// the command that runs the same seed and configuration again, and the
// timeline of the first keys that broke the invariant.
package chaos
