// Package dynamodb is a persistence.Store backed by an Amazon DynamoDB table,
// through the AWS SDK for Go v2.
//
// # Requests
//
// Each Store method sends exactly one request:
//
//   - Put: a PutItem conditioned as in Powertools for AWS Lambda,
//     attribute_not_exists(id) OR expiration < :now OR (status = INPROGRESS
//     AND in_progress_expiration < :now_ms), with
//     ReturnValuesOnConditionCheckFailure ALL_OLD, so that a conflict
//     carries the existing record at no extra cost. Servers that ignore
//     ALL_OLD (dynalite, older DynamoDB Local) return a conflict without
//     it, and the caller falls back to Get.
//   - Get: a strongly consistent GetItem.
//   - Update: an UpdateItem conditioned on the record being the caller's
//     own reservation, its owner token and in progress (fenced; see
//     docs/protocol.md). A completion refused because the caller's own
//     completion is there already (an attempt whose reply was lost)
//     succeeds: a GetItem on that path only tells it apart.
//   - Delete: a DeleteItem conditioned on the record being the caller's
//     own reservation, or on its being gone already (fenced).
//   - Commit (idempotency.WithTransactions): one TransactWriteItems, the
//     writes the function staged (Stage) and the fenced completion, so
//     that a side effect in DynamoDB commits exactly once with its key;
//     without staged writes, an Update.
//
// With package idempotency, a first call therefore costs 2 requests (Put,
// Update), a replay 1 (the failed Put), or 2 against servers that ignore
// ALL_OLD, and a handler error 2 (Put, Delete). With memory.NewCache in
// front of the store, a replay in the same execution environment costs
// none.
//
// Each write hands the client two options for that request alone: its
// retryer, wrapped (see Global tables below), and its protocol, wrapped so
// that the body of an error the service models, such as the failed
// condition that carries a replay's record, is read once and decoded by
// the protocol's own decoder, instead of read three times. Any answer the
// wrapper is not sure of goes to the client's protocol unchanged.
//
// The store's IAM policy needs dynamodb:PutItem, dynamodb:GetItem,
// dynamodb:UpdateItem and dynamodb:DeleteItem on the table; a
// transaction needs, for each staged write, its own action on its table
// (dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:DeleteItem or
// dynamodb:ConditionCheckItem); CreateTable
// additionally needs dynamodb:CreateTable, dynamodb:DescribeTable and
// dynamodb:UpdateTimeToLive.
//
// # Operators' tools
//
// Store.List reads the records page by page (a Query of the static
// partition key with a sort key, a Scan otherwise), Store.DeleteRecord
// deletes a record only if it is still the one read, Store.Sweep deletes
// expired records from tables without time to live, and CheckTable
// checks a table's key schema and replication: the retrysafe command is
// built on them. They need dynamodb:Query or dynamodb:Scan,
// dynamodb:DeleteItem and dynamodb:GetItem, and dynamodb:DescribeTable.
//
// # Global tables
//
// A global table replicates its items across AWS Regions in one of two
// consistency modes, and Options.GlobalTable says which, for CheckTable to
// check:
//
//   - Multi-Region strong consistency (MRSC, GlobalTableStrong): every
//     conditional write is checked against the latest version of the item
//     in every Region, so the guarantees hold across Regions, at the cost
//     of a write replicated to another Region before it is acknowledged.
//     Such a table runs no transactions (Commit refuses staged writes
//     before sending them) and has no time to live (Store.Sweep deletes
//     expired records). A write that races one from another Region on the
//     same item is rejected with ReplicatedWriteConflictException, which
//     the SDK for Go does not retry: the store adds it to the retryable
//     errors of the client's retryer for each write it sends, which then
//     retries it within its own bounds (attempts, backoff with jitter,
//     retry quota, the context). Every write of the protocol can be sent
//     again (docs/protocol.md, Lost replies, retries, and late writes).
//     The same wrapper never retries a failed condition
//     (ConditionalCheckFailedException), whatever the client's retryer
//     would say: it is the answer a conditional write asks for.
//   - Multi-Region eventual consistency (MREC, the default mode of global
//     tables): each Region checks conditions against its own copy and
//     resolves conflicts by last writer wins, so two Regions can each
//     reserve one key and both run the function. CheckTable refuses such
//     a table unless the options state a choice: each key written in one
//     Region, its home (GlobalTableHomeRegion), or the risk accepted
//     (GlobalTableLastWriterWins).
//
// docs/guarantees.md (Global tables) says what each mode and choice
// means for the guarantees, with AWS's documentation.
//
// # Items
//
// A record is one item. The attribute names default to Powertools' (see
// Options): the key in id, ExpiresAt in expiration (epoch seconds: make it
// the table's TTL attribute), InProgressExpiresAt in in_progress_expiration
// (epoch milliseconds), status, the response in data and the payload hash
// in validation, so that Powertools' tools and the DynamoDB console read the
// same table. Attributes of its own are additive: owner_token,
// error_type, error_message, response_omitted and data_encoding.
// Strings that are not valid UTF-8 (which a string attribute cannot carry)
// are stored as binary attributes. Items written by Powertools read as
// records too. Expiry is decided by the condition above, evaluated with the
// caller's clock, never by TTL, which deletes late.
//
// # Requests, attribute by attribute
//
// Requests are billed and answered by size, so each carries what a
// guarantee needs, and no more. Expression placeholders are one letter
// (#e, :e); the attribute names are the table's (Options).
//
//   - The reservation (PutItem) writes the key, status, expiration,
//     in_progress_expiration (the bound on how long a crash blocks the key),
//     owner_token (the fence of every later write) and validation (when
//     payload validation is on). Its condition takes a record over exactly
//     when it has expired or its reservation has lapsed: the four attribute
//     names it reads, :now and :now_ms (the two expiries are stored in
//     seconds and milliseconds, as Powertools stores them) and the
//     in-progress status. It leaves out Powertools'
//     attribute_exists(in_progress_expiration), which the comparison after
//     it implies (a comparison with a missing attribute is false). It asks
//     for ALL_OLD, so that a replay is this one request.
//   - The completion (UpdateItem, or the last item of Commit's
//     transaction) is conditioned on owner_token, and writes only what
//     changes on the caller's own record: status, expiration, the result
//     (data and data_encoding, or error_type and error_message, or
//     response_omitted), and it removes in_progress_expiration. It leaves
//     owner_token and validation as the reservation wrote them, and removes
//     nothing else, since the reservation wrote nothing else (a takeover is
//     a whole new item). A renewal of a lease is the same update, in
//     progress, with a new in_progress_expiration.
//   - The release (DeleteItem) is conditioned on owner_token, or on the
//     record being gone already.
//
// For a table shared with other data, set Options.SortKeyAttr: the partition
// key then holds a static value (by default "idempotency#" followed by the
// function name) and the sort key holds the record's key.
//
// # Response size
//
// DynamoDB items are limited to 400 KB, counted as the attribute names plus
// their values. A write costs a unit per KB of the item. A response is
// stored as a string attribute while it is valid UTF-8 and its item fits
// in 1 KB (Options.CompressAbove). Larger responses are stored
// gzip-compressed, as a binary attribute, with data_encoding "gzip", which
// every version of this store reads. An 8 KB list of orders then costs 2
// write units instead of 9 (docs/performance.md). Set CompressAbove to -1
// to keep every response readable in the console. If the item would still
// be larger than 400 KB
// (Options.MaxItemSize), Update completes the record without the response,
// with response_omitted set, and returns an error wrapping
// persistence.ErrResponseOmitted: the key stays completed, so retries do
// not run the side effect again, and they report that the response could
// not be stored instead of replaying it.
//
// # Endpoints and local servers
//
// The store uses whatever client it is given. The SDK's own configuration
// loading honours AWS_ENDPOINT_URL_DYNAMODB, so the same code runs against
// DynamoDB Local, dynalite or LocalStack without change:
//
//	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 go run ./cmd/app     # DynamoDB Local
//	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:4567 go run ./cmd/app     # dynalite
//	AWS_ENDPOINT_URL_DYNAMODB=http://localhost.localstack.cloud:4566 ... # LocalStack
//
// Local servers accept any credentials, but the SDK still needs some (for
// example AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set to any value) and
// a region. CreateTable creates a table with the right key schema there.
// Production tables come from the application's AWS SAM or CDK template,
// with the same key schema and the TTL attribute set to expiration.
package dynamodb
