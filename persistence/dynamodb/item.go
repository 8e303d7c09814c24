package dynamodb

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/internal/epoch"
	"github.com/retrysafe/retrysafe/persistence"
)

// The non-key attributes a record is stored in, in the order of attrs.
// Attributes from firstOptional on are written only when they have a value;
// the others are always written.
const (
	attrExpiry = iota
	attrStatus
	attrToken
	attrInProgressExpiry
	attrData
	attrDataEncoding
	attrValidation
	attrErrorType
	attrErrorMessage
	attrResponseOmitted
	attrHeld
	numAttrs

	firstOptional = attrInProgressExpiry
	numOptional   = numAttrs - firstOptional
)

// placeholders are the expression attribute name (with "#") and value (with
// ":") placeholders of the attributes, by index: one letter each, since
// they are sent with every request.
var placeholders = [numAttrs]string{
	attrExpiry:           "e",
	attrStatus:           "s",
	attrToken:            "t",
	attrInProgressExpiry: "i",
	attrData:             "d",
	attrDataEncoding:     "c",
	attrValidation:       "v",
	attrErrorType:        "y",
	attrErrorMessage:     "m",
	attrResponseOmitted:  "o",
	attrHeld:             "h",
}

// attrNames returns the table's attribute names, by index.
func (o *Options) attrNames() [numAttrs]string {
	return [numAttrs]string{
		attrExpiry:           o.ExpiryAttr,
		attrStatus:           o.StatusAttr,
		attrToken:            o.TokenAttr,
		attrInProgressExpiry: o.InProgressExpiryAttr,
		attrData:             o.DataAttr,
		attrDataEncoding:     o.DataEncodingAttr,
		attrValidation:       o.ValidationKeyAttr,
		attrErrorType:        o.ErrorTypeAttr,
		attrErrorMessage:     o.ErrorMessageAttr,
		attrResponseOmitted:  o.ResponseOmittedAttr,
		attrHeld:             o.HeldAttr,
	}
}

// values are a record's non-key attribute values, by index; nil means absent.
type values [numAttrs]types.AttributeValue

// encodingGzip is the value of the data encoding attribute for gzip.
const encodingGzip = "gzip"

// maxInflated bounds the size of a decompressed response, so that a corrupt
// or hostile item cannot exhaust memory. It is far above what a Lambda
// function can return (6 MB).
const maxInflated = 64 << 20

// writeUnit is the item size DynamoDB bills one write request unit for.
// By default a response is compressed when its item would be larger, since
// a unit costs more than compressing a few KB.
const writeUnit = 1 << 10

// encode maps rec to attribute values, compressing the response if it is
// larger than a positive CompressAbove option (see fit for the default).
func (s *Store) encode(rec *persistence.Record) values {
	var v values
	// ExpiresAt is a whole second by contract; InProgressExpiresAt is an
	// invocation deadline, rounded up so that the reservation never lapses
	// before it.
	v[attrExpiry] = number(rec.ExpiresAt.Unix())
	switch rec.Status {
	case persistence.StatusInProgress:
		v[attrStatus] = inProgressValue
	case persistence.StatusCompleted:
		v[attrStatus] = completedValue
	default:
		v[attrStatus] = str(string(rec.Status))
	}
	v[attrToken] = str(rec.Token)
	if !rec.InProgressExpiresAt.IsZero() {
		v[attrInProgressExpiry] = number(epoch.CeilMillis(rec.InProgressExpiresAt))
	}
	if len(rec.Response) > 0 {
		compressed := s.opts.CompressAbove > 0 && len(rec.Response) > s.opts.CompressAbove && s.compress(&v, rec.Response)
		switch {
		case compressed:
		case utf8.Valid(rec.Response):
			v[attrData] = &types.AttributeValueMemberS{Value: string(rec.Response)}
		default:
			// A copy: the caller may change its bytes once the call returns,
			// and decode may hand these out.
			v[attrData] = &types.AttributeValueMemberB{Value: bytes.Clone(rec.Response)}
		}
	}
	if rec.PayloadHash != "" {
		v[attrValidation] = str(rec.PayloadHash)
	}
	if rec.ErrorType != "" {
		v[attrErrorType] = str(rec.ErrorType)
	}
	if rec.ErrorMessage != "" {
		v[attrErrorMessage] = str(rec.ErrorMessage)
	}
	if rec.ResponseOmitted {
		v[attrResponseOmitted] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if rec.Held && rec.Status == persistence.StatusInProgress {
		v[attrHeld] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return v
}

// compress stores response gzip-compressed in v and reports true, unless
// compression does not make it smaller.
func (s *Store) compress(v *values, response []byte) bool {
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	var buf bytes.Buffer
	buf.Grow(len(response) / 4)
	zw.Reset(&buf)
	_, _ = zw.Write(response) // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	if buf.Len() >= len(response) {
		return false
	}
	v[attrData] = &types.AttributeValueMemberB{Value: buf.Bytes()}
	v[attrDataEncoding] = &types.AttributeValueMemberS{Value: encodingGzip}
	return true
}

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// fit makes v fit in an item of at most MaxItemSize bytes with the given key,
// by compressing the response, or failing that by leaving it out. It returns
// an error wrapping persistence.ErrResponseOmitted when it left it out. By
// default (CompressAbove 0) it also compresses the response of an item
// over one write unit.
func (s *Store) fit(v *values, key string, response []byte) error {
	limit := s.opts.MaxItemSize
	if s.opts.CompressAbove == 0 {
		limit = min(limit, writeUnit)
	}
	size := s.itemSize(key, v)
	if size <= limit || v[attrData] == nil {
		return nil
	}
	compressed := v[attrDataEncoding] != nil
	if !compressed && s.opts.CompressAbove >= 0 && s.compress(v, response) {
		compressed = true
		size = s.itemSize(key, v)
	}
	if size <= s.opts.MaxItemSize {
		return nil
	}
	stored := attrValueSize(v[attrData])
	v[attrData], v[attrDataEncoding] = nil, nil
	v[attrResponseOmitted] = &types.AttributeValueMemberBOOL{Value: true}
	how := "uncompressed"
	if compressed {
		how = "gzip-compressed"
	}
	return fmt.Errorf("persistence/dynamodb: response of %d bytes (%d %s) would make an item of %d bytes, over the %d-byte limit: %w",
		len(response), stored, how, size, s.opts.MaxItemSize, persistence.ErrResponseOmitted)
}

// item returns the full item for rec: its key attributes and its values.
func (s *Store) item(key string, v *values) map[string]types.AttributeValue {
	item := s.key(key)
	for i, av := range v {
		if av != nil {
			item[s.names[i]] = av
		}
	}
	return item
}

// key returns the primary key of the record for key.
func (s *Store) key(key string) map[string]types.AttributeValue {
	if s.opts.SortKeyAttr == "" {
		return map[string]types.AttributeValue{
			s.opts.KeyAttr: &types.AttributeValueMemberS{Value: key},
		}
	}
	return map[string]types.AttributeValue{
		s.opts.KeyAttr:     s.staticPK,
		s.opts.SortKeyAttr: &types.AttributeValueMemberS{Value: key},
	}
}

// decode maps an item to a record. Attributes it does not know are ignored,
// so items written by Powertools decode too.
func (s *Store) decode(item map[string]types.AttributeValue) (*persistence.Record, error) {
	var (
		rec persistence.Record
		err error
	)
	keyAttr := s.opts.KeyAttr
	if s.opts.SortKeyAttr != "" {
		keyAttr = s.opts.SortKeyAttr
	}
	k, ok := item[keyAttr].(*types.AttributeValueMemberS)
	if !ok {
		return nil, fmt.Errorf("persistence/dynamodb: item without a string key attribute %q", keyAttr)
	}
	rec.Key = k.Value
	fail := func(i int, err error) (*persistence.Record, error) {
		return nil, fmt.Errorf("persistence/dynamodb: record %q: attribute %q: %w", rec.Key, s.names[i], err)
	}

	if av := item[s.names[attrExpiry]]; av != nil {
		n, err := getNumber(av)
		if err != nil {
			return fail(attrExpiry, err)
		}
		rec.ExpiresAt = time.Unix(n, 0)
	}
	if av := item[s.names[attrInProgressExpiry]]; av != nil {
		n, err := getNumber(av)
		if err != nil {
			return fail(attrInProgressExpiry, err)
		}
		rec.InProgressExpiresAt = time.UnixMilli(n)
	}
	strs := []struct {
		i   int
		dst *string
	}{
		{attrValidation, &rec.PayloadHash},
		{attrToken, &rec.Token},
		{attrErrorType, &rec.ErrorType},
		{attrErrorMessage, &rec.ErrorMessage},
	}
	for _, f := range strs {
		if *f.dst, err = getString(item[s.names[f.i]]); err != nil {
			return fail(f.i, err)
		}
	}
	var status string
	if status, err = getString(item[s.names[attrStatus]]); err != nil {
		return fail(attrStatus, err)
	}
	rec.Status = persistence.Status(status)

	switch av := item[s.names[attrResponseOmitted]].(type) {
	case nil:
	case *types.AttributeValueMemberBOOL:
		rec.ResponseOmitted = av.Value
	default:
		return fail(attrResponseOmitted, fmt.Errorf("want type BOOL, got %T", av))
	}
	switch av := item[s.names[attrHeld]].(type) {
	case nil:
	case *types.AttributeValueMemberBOOL:
		rec.Held = av.Value
	default:
		return fail(attrHeld, fmt.Errorf("want type BOOL, got %T", av))
	}

	var encoding string
	if encoding, err = getString(item[s.names[attrDataEncoding]]); err != nil {
		return fail(attrDataEncoding, err)
	}
	switch av := item[s.names[attrData]].(type) {
	case nil:
	case *types.AttributeValueMemberS:
		if encoding != "" {
			return fail(attrData, fmt.Errorf("encoding %q on a string", encoding))
		}
		rec.Response = []byte(av.Value)
	case *types.AttributeValueMemberB:
		switch encoding {
		case "":
			rec.Response = av.Value
		case encodingGzip:
			if rec.Response, err = gunzip(av.Value); err != nil {
				return fail(attrData, err)
			}
		default:
			return fail(attrData, fmt.Errorf("unknown encoding %q", encoding))
		}
	default:
		return fail(attrData, fmt.Errorf("want type S or B, got %T", av))
	}
	return &rec, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxInflated+1))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if len(out) > maxInflated {
		return nil, fmt.Errorf("gzip: decompresses to more than %d bytes", maxInflated)
	}
	return out, nil
}

// str stores s as a string attribute, or as a binary one when s is not
// valid UTF-8 (which a string attribute cannot carry: the SDK's JSON
// encoding would replace the invalid bytes).
func str(s string) types.AttributeValue {
	if utf8.ValidString(s) {
		return &types.AttributeValueMemberS{Value: s}
	}
	return &types.AttributeValueMemberB{Value: []byte(s)}
}

// getString reverses str; an absent attribute is "".
func getString(av types.AttributeValue) (string, error) {
	switch av := av.(type) {
	case nil:
		return "", nil
	case *types.AttributeValueMemberS:
		return av.Value, nil
	case *types.AttributeValueMemberB:
		return string(av.Value), nil
	}
	return "", fmt.Errorf("want type S, got %T", av)
}

func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getNumber(av types.AttributeValue) (int64, error) {
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("want type N, got %T", av)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		// Integral numbers written in another notation ("1.7e9").
		f, ferr := strconv.ParseFloat(n.Value, 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, fmt.Errorf("want an integer, got %q", n.Value)
		}
		v = int64(f)
	}
	return v, nil
}

// itemSize returns the size of the item for key with values v as DynamoDB
// counts it against its item size limit: the UTF-8 length of every attribute
// name plus the size of its value (see attrValueSize).
func (s *Store) itemSize(key string, v *values) int {
	size := len(s.opts.KeyAttr)
	if s.opts.SortKeyAttr == "" {
		size += len(key)
	} else {
		size += len(s.opts.StaticPKValue) + len(s.opts.SortKeyAttr) + len(key)
	}
	for i, av := range v {
		if av != nil {
			size += len(s.names[i]) + attrValueSize(av)
		}
	}
	return size
}

// attrValueSize returns the size DynamoDB counts for a value: the UTF-8
// length of a string, the length of a binary, 1 for a boolean or null, for
// a number an upper bound of its documented size (1 byte per 2 significant
// digits, plus 1), which dynalite's own count stays under too, the sum of
// the members of a set, and for a list or a map 3 bytes, plus 1 per
// element, plus the elements (and a map's names).
func attrValueSize(av types.AttributeValue) int {
	switch av := av.(type) {
	case *types.AttributeValueMemberS:
		return len(av.Value)
	case *types.AttributeValueMemberB:
		return len(av.Value)
	case *types.AttributeValueMemberN:
		return numberSize(av.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sum(av.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sum(av.Value, numberSize)
	case *types.AttributeValueMemberBS:
		return sum(av.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		return 3 + len(av.Value) + sum(av.Value, attrValueSize)
	case *types.AttributeValueMemberM:
		return 3 + len(av.Value) + attributesSize(av.Value)
	}
	return 0 // a value the SDK does not know: DynamoDB itself will judge it
}

// sum returns the sum of size over values.
func sum[T any](values []T, size func(T) int) int {
	n := 0
	for _, v := range values {
		n += size(v)
	}
	return n
}

// attributesSize returns the size of the attributes of an item or a map:
// their names and values.
func attributesSize(m map[string]types.AttributeValue) int {
	n := 0
	for name, v := range m {
		n += len(name) + attrValueSize(v)
	}
	return n
}

func numberSize(n string) int {
	neg := 0
	if len(n) > 0 && n[0] == '-' {
		neg = 1
	}
	// Significant digits: from the first non-zero digit to the last.
	first, last := -1, -1
	for i := 0; i < len(n); i++ {
		if c := n[i]; c >= '1' && c <= '9' {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	digits := 0
	for i := first; first >= 0 && i <= last; i++ {
		if c := n[i]; c >= '0' && c <= '9' {
			digits++
		}
	}
	return 2 + (digits+1)/2 + neg
}

var errEmptyKey = errors.New("persistence/dynamodb: empty record key")

// checkKey rejects keys DynamoDB cannot store as a string key: empty, or not
// valid UTF-8 (which the SDK would silently change, so that two keys could
// collide).
func checkKey(key string) error {
	if key == "" {
		return errEmptyKey
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("persistence/dynamodb: record key %q is not valid UTF-8", key)
	}
	return nil
}
