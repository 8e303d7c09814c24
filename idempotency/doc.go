// Package idempotency makes a function safe to retry: it runs at most once
// per idempotency key, and every retry with the key gets the stored result
// instead of running it again. It is the Go counterpart of the Idempotency
// utility of Powertools for AWS Lambda.
//
// [Wrap] decorates any func(context.Context, In) (Out, error), such as a
// Lambda handler for lambda.Start:
//
//	store, _ := dynamodb.New(client, "idempotency")
//	lambda.Start(idempotency.Must(idempotency.Wrap(handler, store,
//		idempotency.WithKey("powertools_json(body).order_id"))))
//
// # How it works
//
// [Guard] is the state machine; [Wrap] is a typed layer over it. The key is
// prefix#sha256(canonical JSON of the selected input) (docs/keys.md in the
// repository defines it). Before the handler runs, the key is reserved
// with a conditional write that fails when a live record exists: two
// concurrent invocations with one key never both run. The reservation
// holds the key until the invocation's deadline (the context's), so a
// crashed invocation blocks its key until then, not until the record
// expires. When the handler succeeds its result is stored with an expiry
// ([WithExpiry]); when it fails the reservation is deleted so a retry can
// run, unless the error is permanent ([Permanent], [WithPermanentErrors]),
// in which case it is stored and replayed.
//
// Completion and release are fenced: they only succeed while the record
// carries the token of the invocation that wrote it, so a late finisher
// cannot overwrite or delete the record of an invocation that took over
// after its deadline. A reservation whose reply was lost and whose write was
// retried recognises itself by the same token.
//
// # Guarantees and their limits
//
// Within a key's expiry, the handler's side effect runs at most once per
// successful completion, with these exceptions, which follow from running
// the side effect outside the store's transaction:
//
//   - An invocation that dies after its side effect and before its result
//     is stored leaves an in-progress record; after its deadline a retry
//     runs the handler again. Make the side effect itself idempotent when
//     this matters (forward [KeyFromContext] to your payment provider).
//   - If storing the result fails, the caller still gets the result, the
//     failure is logged and reported ([EventCompletionFailed]), and the key
//     stays reserved until the deadline; a retry after that runs again.
//   - An invocation that runs past its deadline can be overtaken by a retry;
//     its own completion is then refused ([EventFencedOut]).
//
// # Options
//
// Behaviour is configured with functional options ([Option]), checked when
// the handler is wrapped, so that a bad expression fails at cold start. The
// same Option type serves [Wrap], [NewGuard] and the adapters of packages
// httpapi and batch, which take this package's options directly, besides
// their own (httpapi.WithHeader, batch.WithParallelism). An option given to
// a function it does not apply to ([WithKey] to [NewGuard], an HTTP option
// to [Wrap]), or given twice, is an error. Plain data, such as a store's
// attribute names, is an Options struct set through functions, as in the
// AWS SDK: dynamodb.New(client, table, func(o *dynamodb.Options) {...}).
//
// Environment variables keep the meaning they have in Powertools:
// POWERTOOLS_IDEMPOTENCY_DISABLED set to a true value (1, true, yes, on,
// y, t) makes [Wrap] return the handler itself and [Guard.Do] call its
// function; AWS_LAMBDA_FUNCTION_NAME starts the default key prefix.
//
// # Errors
//
// The handler's own errors are returned unchanged. The library's errors are
// the pointer types [InProgressError], [PayloadMismatchError], [KeyError],
// [StoreError], [StoredError], [ResponseTooLargeError], [ReplayError] and
// [ResponseEncodingError], each matching a sentinel with errors.Is. Lambda
// reports an error's type name as its errorType, which Step Functions
// retry rules can match (for example, retry "InProgressError" with
// backoff).
package idempotency
