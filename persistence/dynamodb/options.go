package dynamodb

import (
	"errors"
	"fmt"
	"os"
)

// Options configures a Store (and [CreateTable]). The zero value of every
// field means its default. The attribute names default to those of
// Powertools for AWS Lambda. A table can thus be shared with, and
// inspected by, the same tools.
type Options struct {
	// KeyAttr is the partition key attribute (type S). It holds the record's
	// key, or StaticPKValue when SortKeyAttr is set. Default "id".
	KeyAttr string

	// SortKeyAttr, when set, is the sort key attribute (type S) of a table
	// shared with other data (a single-table design). It then holds the
	// record's key, and the partition key holds StaticPKValue. Default ""
	// (no sort key).
	SortKeyAttr string

	// StaticPKValue is the partition key value of every record when
	// SortKeyAttr is set. Default "idempotency#" followed by the value of
	// AWS_LAMBDA_FUNCTION_NAME, as in Powertools. It must be empty when
	// SortKeyAttr is.
	StaticPKValue string

	// ExpiryAttr holds Record.ExpiresAt in epoch seconds (type N; callers
	// give whole seconds). Make it the table's TTL attribute so that
	// DynamoDB deletes expired records eventually; the store itself never
	// relies on that. Default "expiration".
	ExpiryAttr string

	// InProgressExpiryAttr holds Record.InProgressExpiresAt in epoch
	// milliseconds, rounded up (type N), absent when it is zero. Default
	// "in_progress_expiration".
	InProgressExpiryAttr string

	// StatusAttr holds Record.Status (type S). Default "status".
	StatusAttr string

	// DataAttr holds Record.Response. It is type S when the response is valid
	// UTF-8 and not compressed, as Powertools stores it, readable in the
	// console. It is type B otherwise. It is absent when the response is empty
	// or was omitted. Default "data".
	DataAttr string

	// ValidationKeyAttr holds Record.PayloadHash (type S), absent when empty.
	// Default "validation".
	ValidationKeyAttr string

	// TokenAttr holds Record.Token, the owner token that fences Update and
	// Delete (type S). Not a Powertools attribute. Default "owner_token".
	TokenAttr string

	// ErrorTypeAttr and ErrorMessageAttr hold a recorded handler error
	// (Record.ErrorType and Record.ErrorMessage, type S), absent when empty.
	// Not Powertools attributes. Defaults "error_type" and "error_message".
	ErrorTypeAttr    string
	ErrorMessageAttr string

	// ResponseOmittedAttr is true (type BOOL) when the record was completed
	// without its response because the response did not fit in an item
	// (Record.ResponseOmitted); absent otherwise. Not a Powertools attribute.
	// Default "response_omitted".
	ResponseOmittedAttr string

	// HeldAttr is true (type BOOL) on a reservation that keeps its key when
	// it lapses (Record.Held, idempotency.WithHoldUntilReleased); absent
	// otherwise. Not a Powertools attribute. Default "held".
	HeldAttr string

	// DataEncodingAttr names the compression of DataAttr ("gzip"), absent
	// when the data is stored as is. Not a Powertools attribute. Default
	// "data_encoding".
	DataEncodingAttr string

	// CompressAbove is the response size, in bytes, above which responses are
	// stored gzip-compressed (when that makes them smaller). By default a
	// response is compressed when its item would be larger than 1 KB, the
	// size of a write unit. A negative value turns compression off, so
	// that DataAttr stays readable in the console. Responses that do not
	// fit are then omitted sooner.
	CompressAbove int

	// MaxItemSize is the largest item, in bytes as DynamoDB counts them
	// (attribute names plus values), that Update writes with its response.
	// A record that would be larger is completed without its response (see
	// persistence.ErrResponseOmitted). Default and maximum 400 KB (409,600
	// bytes), DynamoDB's item size limit. A smaller value caps the read capacity a replay
	// costs.
	MaxItemSize int

	// GlobalTable describes the table's replication across AWS Regions. It is
	// empty for a table in one Region. For a global table it is one of
	// [GlobalTableStrong], [GlobalTableHomeRegion] and
	// [GlobalTableLastWriterWins]. [CheckTable] checks it against the table.
	// With GlobalTableStrong, Commit refuses staged writes without sending
	// them, since such a table runs no transactions. Default "".
	GlobalTable GlobalTable
}

const (
	// maxItemSize is DynamoDB's item size limit, the default and largest
	// Options.MaxItemSize.
	maxItemSize = 400 << 10
)

// resolveOptions applies optFns to the zero Options, fills in the defaults and
// validates the result.
func resolveOptions(optFns []func(*Options)) (Options, error) {
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.KeyAttr, "id")
	def(&o.ExpiryAttr, "expiration")
	def(&o.InProgressExpiryAttr, "in_progress_expiration")
	def(&o.StatusAttr, "status")
	def(&o.DataAttr, "data")
	def(&o.ValidationKeyAttr, "validation")
	def(&o.TokenAttr, "owner_token")
	def(&o.ErrorTypeAttr, "error_type")
	def(&o.ErrorMessageAttr, "error_message")
	def(&o.ResponseOmittedAttr, "response_omitted")
	def(&o.DataEncodingAttr, "data_encoding")
	def(&o.HeldAttr, "held")
	if o.SortKeyAttr != "" {
		def(&o.StaticPKValue, "idempotency#"+os.Getenv("AWS_LAMBDA_FUNCTION_NAME"))
	} else if o.StaticPKValue != "" {
		return o, errors.New("persistence/dynamodb: Options.StaticPKValue is set but Options.SortKeyAttr is not; the static partition key value needs a sort key")
	}
	switch {
	case o.MaxItemSize == 0:
		o.MaxItemSize = maxItemSize
	case o.MaxItemSize < 0 || o.MaxItemSize > maxItemSize:
		return o, fmt.Errorf("persistence/dynamodb: Options.MaxItemSize %d is outside 1 to %d (DynamoDB's item size limit)", o.MaxItemSize, maxItemSize)
	}

	if !o.GlobalTable.valid() {
		return o, fmt.Errorf("persistence/dynamodb: Options.GlobalTable %q is none of GlobalTableStrong (%q), GlobalTableHomeRegion (%q) and GlobalTableLastWriterWins (%q)",
			o.GlobalTable, GlobalTableStrong, GlobalTableHomeRegion, GlobalTableLastWriterWins)
	}

	names := []struct{ field, value string }{
		{"KeyAttr", o.KeyAttr},
		{"SortKeyAttr", o.SortKeyAttr},
		{"ExpiryAttr", o.ExpiryAttr},
		{"InProgressExpiryAttr", o.InProgressExpiryAttr},
		{"StatusAttr", o.StatusAttr},
		{"DataAttr", o.DataAttr},
		{"ValidationKeyAttr", o.ValidationKeyAttr},
		{"TokenAttr", o.TokenAttr},
		{"ErrorTypeAttr", o.ErrorTypeAttr},
		{"ErrorMessageAttr", o.ErrorMessageAttr},
		{"ResponseOmittedAttr", o.ResponseOmittedAttr},
		{"DataEncodingAttr", o.DataEncodingAttr},
		{"HeldAttr", o.HeldAttr},
	}
	seen := make(map[string]string, len(names))
	for _, n := range names {
		if n.value == "" {
			continue // only SortKeyAttr may be empty here
		}
		if other, dup := seen[n.value]; dup {
			return o, fmt.Errorf("persistence/dynamodb: Options.%s and Options.%s are both %q; every attribute needs a name of its own", other, n.field, n.value)
		}
		seen[n.value] = n.field
	}
	return o, nil
}
