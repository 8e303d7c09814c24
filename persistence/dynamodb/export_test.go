package dynamodb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/persistence"
)

// UpdateInput exposes updateInput to the tests of the request's shape.
func (s *Store) UpdateInput(rec *persistence.Record) (*dynamodb.UpdateItemInput, error) {
	return s.updateInput(rec)
}

// RetryConflicts exposes the option that each write passes to the client.
var RetryConflicts = retryReplicatedWriteConflicts

// ExpiryAttr is the expiry attribute of a store with optFns, defaults
// applied.
func ExpiryAttr(optFns ...func(*Options)) string {
	o, _ := resolveOptions(optFns)
	return o.ExpiryAttr
}

// DynamoDB's limits and the store's defaults, for the tests at their
// edges.
const (
	MaxTransactionItems = maxTransactionItems
	MaxTransactionBytes = maxTransactionBytes
	MaxItemSize         = maxItemSize
	WriteUnit           = writeUnit
)

// ErrorCode exposes the search for an error's code that the store's
// retryer makes without reflection.
var ErrorCode = errorCode

// ItemSize is the size DynamoDB counts for an item: its attribute names
// and values.
var ItemSize = attributesSize
