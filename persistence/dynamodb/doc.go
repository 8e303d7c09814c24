// Package dynamodb is a [persistence.Store] backed by an Amazon DynamoDB
// table, through the AWS SDK for Go v2.
//
// # Requests
//
// Each Store method sends exactly one request:
//
//   - Put sends a PutItem conditioned as in Powertools for AWS Lambda
//     (the condition is below). It asks for
//     ReturnValuesOnConditionCheckFailure ALL_OLD. A conflict then carries
//     the existing record at no extra cost. Servers that ignore ALL_OLD
//     (dynalite, older DynamoDB Local) return a conflict without it. The
//     caller then falls back to Get.
//   - Get sends a strongly consistent GetItem.
//   - Update sends an UpdateItem, fenced (see docs/protocol.md). It is
//     conditioned on the record being the caller's own reservation, with
//     its owner token, and in progress. A completion may be refused
//     because the caller's own completion is there already. That happens
//     after an attempt whose reply was lost. Such a completion succeeds. A
//     GetItem on that path only tells it apart.
//   - Delete sends a DeleteItem, fenced. It is conditioned on the record
//     being the caller's own reservation, or on its being gone already.
//   - Commit (idempotency.WithTransactions) sends one TransactWriteItems.
//     It holds the writes the function staged ([Stage]) and the fenced
//     completion. A side effect in DynamoDB thus commits exactly once with
//     its key. Without staged writes, Commit is an Update.
//
// Put's condition is this one:
//
//	attribute_not_exists(id) OR expiration < :now OR
//	(status = INPROGRESS AND in_progress_expiration < :now_ms)
//
// With package idempotency, a first call therefore costs 2 requests (Put,
// Update). A replay costs 1 (the failed Put), or 2 against servers that
// ignore ALL_OLD. A handler error costs 2 (Put, Delete). With
// memory.NewCache in front of the store, a replay in the same execution
// environment costs none.
//
// Each write hands the client two options for that request alone. The
// first is its retryer, wrapped (see Global tables below). The second is
// its protocol, wrapped for errors the service models, such as the failed
// condition that carries a replay's record. The wrapper reads the body of
// such an error once and decodes it with the protocol's own decoder. The
// client's protocol would read it three times. Any answer the wrapper is
// not sure of goes to the client's protocol unchanged.
//
// The store's IAM policy needs these actions on the table:
//
//	dynamodb:PutItem, dynamodb:GetItem, dynamodb:UpdateItem, dynamodb:DeleteItem
//
// A transaction needs, for each staged write, its own action on its table.
// That is one of these:
//
//	dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem, dynamodb:ConditionCheckItem
//
// [CreateTable] additionally needs these:
//
//	dynamodb:CreateTable, dynamodb:DescribeTable, dynamodb:UpdateTimeToLive
//
// # Operators' tools
//
// The retrysafe command is built on these tools:
//
//   - [Store.List] reads the records page by page. It sends a Query of the
//     static partition key with a sort key, and a Scan otherwise.
//   - [Store.DeleteRecord] deletes a record only if it is still the one read.
//   - [Store.Sweep] deletes expired records from tables without time to live.
//   - [CheckTable] checks a table's key schema and replication.
//
// They need these actions:
//
//	dynamodb:Query or dynamodb:Scan
//	dynamodb:DeleteItem and dynamodb:GetItem
//	dynamodb:DescribeTable
//
// # Global tables
//
// A global table replicates its items across AWS Regions in one of two
// consistency modes. [Options.GlobalTable] says which, for [CheckTable] to
// check.
//
//   - Multi-Region strong consistency (MRSC, [GlobalTableStrong]). Every
//     conditional write is checked against the latest version of the item
//     in every Region. The guarantees thus hold across Regions. The cost
//     is a write replicated to another Region before it is acknowledged.
//     Such a table runs no transactions. Commit refuses staged writes
//     before sending them. It has no time to live either, so
//     [Store.Sweep] deletes expired records. A write that races one from
//     another Region on the same item is rejected with
//     ReplicatedWriteConflictException. The SDK for Go does not retry it.
//     So the store adds it to the retryable errors of the client's
//     retryer, for each write it sends. The retryer then retries it within
//     its own bounds: attempts, backoff with jitter, retry quota, the
//     context. Every write of the protocol can be sent again
//     (docs/protocol.md, Lost replies, retries, and late writes). The same
//     wrapper never retries a failed condition
//     (ConditionalCheckFailedException), whatever the client's retryer
//     would say. It is the answer a conditional write asks for.
//   - Multi-Region eventual consistency (MREC, the default mode of global
//     tables). Each Region checks conditions against its own copy and
//     resolves conflicts by last writer wins. Two Regions can thus each
//     reserve one key and both run the function. [CheckTable] refuses such
//     a table unless the options state a choice. Either each key is
//     written in one Region, its home ([GlobalTableHomeRegion]). Or the
//     risk is accepted ([GlobalTableLastWriterWins]).
//
// docs/guarantees.md (Global tables) says what each mode and choice
// means for the guarantees, with AWS's documentation.
//
// # Items
//
// A record is one item. The attribute names default to Powertools' (see
// [Options]). Powertools' tools and the DynamoDB console thus read the same
// table. The defaults are:
//
//   - the key in id
//   - ExpiresAt in expiration, in epoch seconds (make it the table's TTL
//     attribute)
//   - InProgressExpiresAt in in_progress_expiration, in epoch milliseconds
//   - status
//   - the response in data
//   - the payload hash in validation
//
// Attributes of its own are additive: owner_token, error_type,
// error_message, response_omitted and data_encoding. Strings that are not
// valid UTF-8 are stored as binary attributes, since a string attribute
// cannot carry them. Items written by Powertools read as records too.
// Expiry is decided by the condition above, evaluated with the caller's
// clock. It is never decided by TTL, which deletes late.
//
// # Requests, attribute by attribute
//
// Requests are billed and answered by size. So each carries what a
// guarantee needs, and no more. Expression placeholders are one letter
// (#e, :e). The attribute names are the table's ([Options]).
//
//   - The reservation (PutItem) writes the key, status and expiration. It
//     writes in_progress_expiration, the bound on how long a crash blocks
//     the key. It writes owner_token, the fence of every later write. It
//     writes validation when payload validation is on. Its condition takes
//     a record over exactly when it has expired or its reservation has
//     lapsed. The condition carries four attribute names and the in-progress
//     status. It carries the time in seconds as :now. It carries it in
//     milliseconds as :now_ms. The two expiries are stored in seconds and
//     milliseconds, as Powertools stores them. The condition leaves
//     out Powertools' attribute_exists(in_progress_expiration). The
//     comparison after it implies it, since a comparison with a missing
//     attribute is false. The reservation asks for ALL_OLD, so that a
//     replay is this one request.
//   - The completion (UpdateItem, or the last item of Commit's
//     transaction) is conditioned on owner_token. It writes only what
//     changes on the caller's own record. That is status, expiration and
//     the result. The result is data and data_encoding, or error_type and
//     error_message, or response_omitted. The completion also removes
//     in_progress_expiration. It leaves owner_token and validation as the
//     reservation wrote them. It removes nothing else, since the
//     reservation wrote nothing else (a takeover is a whole new item). A
//     renewal of a lease is the same update, in progress, with a new
//     in_progress_expiration.
//   - The release (DeleteItem) is conditioned on owner_token, or on the
//     record being gone already.
//
// For a table shared with other data, set [Options.SortKeyAttr]. The
// partition key then holds a static value, by default "idempotency#"
// followed by the function name. The sort key holds the record's key.
//
// # Response size
//
// DynamoDB items are limited to 400 KB, counted as the attribute names plus
// their values. A write costs a unit per KB of the item. A response is
// stored as a string attribute while it is valid UTF-8 and its item fits
// in 1 KB ([Options.CompressAbove]). Larger responses are stored
// gzip-compressed, as a binary attribute, with data_encoding "gzip". Every
// version of this store reads them. An 8 KB list of orders then costs 2
// write units instead of 9 (docs/performance.md). Set CompressAbove to -1
// to keep every response readable in the console.
//
// The item may still be larger than 400 KB ([Options.MaxItemSize]). Then
// Update completes the record without the response, with response_omitted
// set. It returns an error wrapping [persistence.ErrResponseOmitted]. The
// key stays completed, so retries do not run the side effect again. They
// report that the response could not be stored instead of replaying it.
//
// # Endpoints and local servers
//
// The store uses whatever client it is given. The SDK's own configuration
// loading honours AWS_ENDPOINT_URL_DYNAMODB. So the same code runs against
// DynamoDB Local, dynalite or LocalStack without change:
//
//	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 go run ./cmd/app     # DynamoDB Local
//	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:4567 go run ./cmd/app     # dynalite
//	AWS_ENDPOINT_URL_DYNAMODB=http://localhost.localstack.cloud:4566 ... # LocalStack
//
// Local servers accept any credentials, but the SDK still needs some and a
// region. For example, set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to
// any value. [CreateTable] creates a table with the right key schema there.
// Production tables come from the application's AWS SAM or CDK template.
// They have the same key schema and the TTL attribute set to expiration.
package dynamodb
