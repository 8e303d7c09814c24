// Package idempotency makes a function safe to retry. The function runs at
// most once per idempotency key. Every retry with the key gets the stored
// result instead of running it again. It is the Go counterpart of the
// Idempotency utility of Powertools for AWS Lambda.
//
// [Wrap] decorates any func(context.Context, In) (Out, error), such as a
// Lambda handler for lambda.Start:
//
//	store, _ := dynamodb.New(client, "idempotency")
//	lambda.Start(idempotency.Must(idempotency.Wrap(handler, store,
//		idempotency.WithKey("powertools_json(body).order_id"))))
//
// # How a call runs
//
// [Guard] is the state machine of docs/protocol.md; [Wrap] is a typed layer
// over it. A call's key is prefix#sha256(canonical JSON of the selected
// input) (docs/keys.md defines it). In Lambda's tenant isolation mode the
// invocation's tenant ID is part of it, so that tenants never share a
// record ([WithoutTenantIsolation] gives that up). The call then goes
// through three
// steps, each a write of the protocol's table:
//
//  1. Acquire. The call reserves the key with a conditional write. The
//     write fails when a live record exists, so the function never runs
//     twice at once for one key. A store that holds records in the process
//     ([persistence.LocalReader]) answers a completed key before that,
//     without the write. So does a read of the record when the trigger
//     says the call is likely a retry (an SQS message received again, in
//     package batch). Calls of one Guard (one wrapped function) with
//     one key share one reservation: the first asks the store, the others
//     wait for its answer. A call that finds the key completed returns its
//     stored result, or the recorded error as a [*RecordedError]. A call
//     that finds the key held fails with [*InProgressError], unless
//     [WithWait] lets it wait for the holder's outcome. A call whose
//     payload differs fails with [*PayloadMismatchError]. A store failure
//     fails the call with [*StoreError], and the function does not run.
//  2. Run. The function runs with a context that carries the record's key
//     ([KeyFromContext]). The reservation holds the key until the
//     context's deadline, on Lambda the invocation's. Without a deadline,
//     or with [WithLease], it is a lease renewed while the function runs.
//     The key of a process that dies then lapses within one lease. With
//     [WithHoldUntilReleased] it does not lapse: calls with the key fail
//     with [*HeldError] until an operator releases it.
//  3. Settle. The call writes one of these. A result is stored
//     (complete). A permanent error is recorded ([Permanent],
//     [WithPermanentErrors]). The result is committed with the writes the
//     function staged ([WithTransactions]). Or, when the function failed
//     or panicked, the key is released so that a retry runs it again.
//     These writes run on a context detached from the call's
//     cancellation, with a timeout of their own ([WithFinalWriteTimeout]).
//     If storing a result fails, the result is returned all the same. The
//     key stays reserved until its in-progress expiry. An error would make
//     the caller retry at once into *InProgressError. A release would let
//     a retry repeat the side effect at once.
//
// # Steps
//
// A function with several side effects runs each as a [Step]. A step's
// result is stored in a record of its own, under a key derived from the
// call's key ([StepKey], docs/keys.md). An attempt that runs after an
// earlier one failed, or took over its lapsed reservation, replays the
// stored steps and runs only the others. A step costs a read and a write
// when it runs, and a read when it replays. A function without steps
// costs nothing more.
//
// Every write after the reservation applies only to the call's own
// in-progress record: its owner token, with status INPROGRESS. A call that
// ran past its deadline and was taken over cannot overwrite or delete the
// newer call's record. No write that reaches the store late can reopen a
// completed key.
//
// # Outcomes
//
// [Guard.Do] returns how the call ended as [Result.Outcome]; observers get
// it with [EventCallEnded]. Each outcome follows one path of
// docs/protocol.md:
//
//	outcome            path                                                  error
//	new                reserve applied, the function ran, and its complete,  the function's, when recorded
//	                   record an error or commit applied (or was done)
//	replay             reserve found the key completed                       none, or *ResponseTooLargeError
//	recorded_error     reserve found the key completed with an error         *RecordedError
//	in_progress        reserve found another call's reservation, live        *InProgressError
//	held               reserve found a held reservation, past its            *HeldError
//	                   in-progress expiry (WithHoldUntilReleased)
//	payload_mismatch   reserve found the key used with another payload       *PayloadMismatchError
//	store_error        reserve, or the read after its conflict, failed       *StoreError
//	handler_error      the function failed or panicked; release applied      the function's
//	fenced_out         the function ran; its settling write was refused      the function's, if any
//	completion_failed  the function ran; its settling write failed           the function's, if any
//	not_executed       the function ran and said it did nothing              the function's, if any
//	                   (MarkNotExecuted); release applied
//	not_committed      the function ran; the commit was refused              *CommitError
//	canceled           the call's context ended while it waited              the context's
//	no_key             (Wrap) the input has no key                           *KeyError, or none: it ran
//
// # Options
//
// Behaviour is configured with functional options. They are checked when
// the handler is wrapped, so that a bad expression fails at cold start. An
// option given twice is an error too. The type of each option says where
// it applies. Each entry point takes the kind of its own, so an option
// given where it does not apply does not compile.
//
//	kind               returned by                                    Wrap  NewGuard  httpapi handlers  httpapi.Middleware  batch
//	Option             WithExpiry, WithKeyPrefix, WithLogger,         yes   yes       yes               yes                 yes
//	                   WithLease, WithWait, WithFinalWriteTimeout,
//	                   WithPermanentErrors, WithErrorDecoder,
//	                   WithObserver, WithHoldUntilReleased,
//	                   WithoutTenantIsolation
//	TransactionOption  WithTransactions                               yes   yes       yes                                   yes
//	KeyOption          WithKey, WithPayloadValidation,                yes                                                   yes
//	                   WithRequireKey
//	WrapOption         WithResponseHook                               yes
//	httpapi.Option     httpapi.WithHeader and the others                              yes               yes
//	MiddlewareOption   httpapi.WithRequestScope, WithMaxBodySize                                        yes
//	BatchOption        batch.WithParallelism                                                                                yes
//
// The entry points take [WrapOption], [GuardOption], [HandlerOption],
// [MiddlewareOption] and [BatchOption]. Plain data, such as a store's
// attribute names, is an Options struct set through functions, as in the
// AWS SDK: dynamodb.New(client, table, func(o *dynamodb.Options) {...}).
//
// Environment variables keep the meaning they have in Powertools.
// POWERTOOLS_IDEMPOTENCY_DISABLED set to a true value (1, true, yes, on,
// y, t) makes [Wrap] and [Guard.Do] only call the function. Its errors
// then reach the caller as it returned them, without [Permanent]'s mark.
// AWS_LAMBDA_FUNCTION_NAME starts the default key prefix.
//
// # Errors
//
// The function's own errors are returned unchanged. The library's errors
// are the pointer types [InProgressError], [HeldError], [PayloadMismatchError],
// [KeyError], [StoreError], [RecordedError], [ResponseTooLargeError],
// [ReplayError], [ResponseEncodingError] and [CommitError], each matching
// a sentinel with errors.Is. Lambda reports an error's type name as its
// errorType, which Step Functions retry rules can match (for example,
// retry "InProgressError" with backoff).
//
// # Guarantees and their limits
//
// Within a key's expiry, the function's side effect runs at most once. The
// exceptions come from failures after it started:
//   - a call that dies before its result is stored;
//   - a completion that fails;
//   - a call that runs past its deadline and is taken over.
//
// docs/guarantees.md states each limit, and what [WithTransactions] and
// [WithHoldUntilReleased] close.
package idempotency
