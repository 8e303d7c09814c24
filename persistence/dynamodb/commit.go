package dynamodb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/retrysafe/retrysafe/persistence"
)

var _ persistence.Committer = (*Store)(nil)

// DynamoDB's limits on one TransactWriteItems: the items, the record's
// completion included, and their aggregate size.
const (
	maxTransactionItems = 100
	maxTransactionBytes = 4 << 20
)

// Stage stages writes for the commit of the key of the function that ctx
// was given to (idempotency.WithTransactions). They are sent with the
// completion of its record, in one TransactWriteItems, when the function
// returns without an error. They are never sent otherwise. Each is a Put,
// Update, Delete or ConditionCheck, on any table, but not on the record
// itself. Stage returns an error outside such a function.
//
//	err := dynamodb.Stage(ctx, types.TransactWriteItem{Put: &types.Put{
//		TableName:           aws.String("Ledger"),
//		Item:                entry,
//		ConditionExpression: aws.String("attribute_not_exists(entry_id)"),
//	}})
func Stage(ctx context.Context, writes ...types.TransactWriteItem) error {
	staged := make([]any, len(writes))
	for i, w := range writes {
		staged[i] = w
	}
	return persistence.Stage(ctx, staged...)
}

// TransactionTooLargeError is the reason Commit gives, in a
// [*persistence.CommitCanceledError], for writes it refused before sending
// them. With the record's completion, they exceed DynamoDB's limits on a
// transaction, 100 items and 4 MB.
type TransactionTooLargeError struct {
	Items int // the transaction's items, the completion included
	Bytes int // their size, as DynamoDB counts items (an estimate)
}

// Error implements error.
func (e *TransactionTooLargeError) Error() string {
	return fmt.Sprintf("persistence/dynamodb: a transaction of %d items and about %d bytes exceeds DynamoDB's limits (%d items, %d bytes)",
		e.Items, e.Bytes, maxTransactionItems, maxTransactionBytes)
}

// Commit implements [persistence.Committer] with one TransactWriteItems.
// It holds the writes in order, then the Update that completes rec,
// conditioned on its owner token. Each write is a [types.TransactWriteItem]
// or a *types.TransactWriteItem, as [Stage] stages them. Without writes,
// Commit is Update.
//
// Its ClientRequestToken is derived from the key and the owner token. So a
// commit is not applied twice within DynamoDB's ten minutes. That holds
// for the SDK's retry of a commit whose reply was lost, and for a repeated
// Commit.
//
// The completion is conditioned on the record being the caller's own
// reservation, its owner token and in progress (docs/protocol.md, commit).
// That condition may fail when the record is the caller's own completed
// record. Then an earlier attempt committed, and Commit succeeds without
// writing again. Otherwise it returns an error wrapping
// [persistence.ErrFenced].
//
// Commit returns a [*persistence.CommitCanceledError] when DynamoDB proves
// that nothing was written. That is the case in these events:
//
//   - A write's own condition failed. Its Err wraps DynamoDB's
//     [*types.TransactionCanceledException], whose reasons say which.
//   - The request was refused whatever the data (see refusals). A server
//     without transactions gives a [*TransactionsUnsupportedError].
//   - Before it is sent, the table runs no transactions. [Options.GlobalTable]
//     is [GlobalTableStrong], and the reason is a *TransactionsUnsupportedError.
//   - Before it is sent, it is over DynamoDB's limits. The reason is a
//     [*TransactionTooLargeError].
//
// Other failures are returned wrapped. Their outcome is unknown.
func (s *Store) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	if len(writes) == 0 {
		return s.Update(ctx, rec)
	}
	if err := checkKey(rec.Key); err != nil {
		return err
	}
	if s.opts.GlobalTable == GlobalTableStrong {
		return canceled(&TransactionsUnsupportedError{Err: fmt.Errorf(
			"persistence/dynamodb: commit %q: table %q is a global table of multi-Region strong consistency (Options.GlobalTable), which runs no transactions",
			rec.Key, s.table)})
	}
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	for i, w := range writes {
		switch w := w.(type) {
		case types.TransactWriteItem:
			items = append(items, w)
		case *types.TransactWriteItem:
			if w == nil {
				return canceled(fmt.Errorf("persistence/dynamodb: staged write %d is nil", i))
			}
			items = append(items, *w)
		default:
			return canceled(fmt.Errorf("persistence/dynamodb: staged write %d is a %T, not a types.TransactWriteItem (stage writes with dynamodb.Stage)", i, w))
		}
	}
	update, omitted := s.updateInput(rec)
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName:                 update.TableName,
		Key:                       update.Key,
		UpdateExpression:          update.UpdateExpression,
		ConditionExpression:       update.ConditionExpression,
		ExpressionAttributeNames:  update.ExpressionAttributeNames,
		ExpressionAttributeValues: update.ExpressionAttributeValues,
		// The completion's condition is the fence: its failure is told
		// apart from a write's by its reason, the last.
	}})
	if size := transactionSize(items); len(items) > maxTransactionItems || size > maxTransactionBytes {
		return canceled(&TransactionTooLargeError{Items: len(items), Bytes: size})
	}
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(clientRequestToken(rec)),
	}, writeOptions...)
	if err == nil {
		return omitted
	}
	var txErr *types.TransactionCanceledException
	if errors.As(err, &txErr) {
		reasons := txErr.CancellationReasons
		if len(reasons) == len(items) && aws.ToString(reasons[len(reasons)-1].Code) == "ConditionalCheckFailed" {
			// The completion's condition failed: the record is not the
			// caller's reservation. It may be the caller's own commit,
			// applied by an earlier attempt (done), or another's (fenced).
			return s.refused(ctx, "commit", rec, omitted)
		}
		return canceled(fmt.Errorf("persistence/dynamodb: commit %q: %w", rec.Key, err))
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch code := apiErr.ErrorCode(); {
		case code == "UnknownOperationException":
			return canceled(&TransactionsUnsupportedError{Err: fmt.Errorf("persistence/dynamodb: commit %q: %w", rec.Key, err)})
		case refusals[code]:
			return canceled(fmt.Errorf("persistence/dynamodb: commit %q: %w", rec.Key, err))
		}
	}
	return fmt.Errorf("persistence/dynamodb: commit %q: %w", rec.Key, err)
}

// refusals are the error codes with which DynamoDB refuses a request
// without running it, whatever the data: the request is invalid, names a
// table that does not exist, or is not allowed. They are the same for
// every attempt the SDK makes of one request, so they prove that no
// attempt applied, and a commit refused with one wrote nothing
// (docs/protocol.md, What a commit error proves). Throttling is not among
// them: an earlier attempt whose reply was lost may have committed before
// a later one was throttled.
var refusals = map[string]bool{
	"ValidationException":                 true, // an invalid request: two writes of one item, a bad expression
	"ResourceNotFoundException":           true, // a table that does not exist
	"AccessDeniedException":               true,
	"UnrecognizedClientException":         true, // an unknown access key
	"InvalidSignatureException":           true,
	"IncompleteSignatureException":        true,
	"MissingAuthenticationTokenException": true,
	"SerializationException":              true, // a request that does not parse
}

// TransactionsUnsupportedError is the reason Commit gives, in a
// [*persistence.CommitCanceledError], when no transaction can run. Either
// the server does not run transactions, or the table runs none. A server
// such as dynalite answers TransactWriteItems with
// UnknownOperationException. A global table of multi-Region strong
// consistency runs none ([Options.GlobalTable]). Nothing was written.
type TransactionsUnsupportedError struct {
	Err error // the server's answer, or why Commit did not send the transaction
}

// Error implements error.
func (e *TransactionsUnsupportedError) Error() string {
	return "persistence/dynamodb: no transactions (TransactWriteItems) here: turn idempotency.WithTransactions off, or use a DynamoDB table that supports them: " + e.Err.Error()
}

// Unwrap returns the server's answer, or why Commit did not send the
// transaction.
func (e *TransactionsUnsupportedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, persistence.ErrNoTransactions) true.
func (e *TransactionsUnsupportedError) Is(target error) bool {
	return target == persistence.ErrNoTransactions
}

func canceled(err error) error { return &persistence.CommitCanceledError{Err: err} }

// clientRequestToken returns the ClientRequestToken of rec's commit: 32 hex
// digits of the SHA-256 of its key and owner token, unique to the
// invocation that reserved the key.
func clientRequestToken(rec *persistence.Record) string {
	sum := sha256.Sum256([]byte("retrysafe commit\x00" + rec.Key + "\x00" + rec.Token))
	return hex.EncodeToString(sum[:16])
}

// transactionSize estimates the size DynamoDB counts for a transaction's
// items: their keys, items and expression values.
func transactionSize(items []types.TransactWriteItem) int {
	n := 0
	for _, it := range items {
		switch {
		case it.Put != nil:
			n += attributesSize(it.Put.Item) + attributesSize(it.Put.ExpressionAttributeValues)
		case it.Update != nil:
			n += attributesSize(it.Update.Key) + attributesSize(it.Update.ExpressionAttributeValues) + len(aws.ToString(it.Update.UpdateExpression))
		case it.Delete != nil:
			n += attributesSize(it.Delete.Key) + attributesSize(it.Delete.ExpressionAttributeValues)
		case it.ConditionCheck != nil:
			n += attributesSize(it.ConditionCheck.Key) + attributesSize(it.ConditionCheck.ExpressionAttributeValues)
		}
	}
	return n
}
