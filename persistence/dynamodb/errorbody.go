package dynamodb

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// decodeErrorsOnce is an option of each write the store sends: it hands
// the request a protocol ([errorProtocol]) that decodes a modelled error,
// such as the failed condition every replay gets, in one pass over its
// body. A client that is not the SDK's, or has no protocol, is left as it
// is.
func decodeErrorsOnce(o *dynamodb.Options) {
	if o.Protocol == nil {
		return
	}
	if p := lastErrorProtocol.Load(); p != nil && p.ClientProtocol == o.Protocol {
		o.Protocol = p
		return
	}
	p := &errorProtocol{ClientProtocol: o.Protocol}
	if reflect.TypeOf(o.Protocol).Comparable() {
		lastErrorProtocol.Store(p)
	}
	o.Protocol = p
}

// lastErrorProtocol is the last protocol decodeErrorsOnce wrapped, kept
// for the same reasons, and compared the same way, as conflictRetryer.
var lastErrorProtocol atomic.Pointer[errorProtocol]

// errorProtocol is a client's protocol that decodes the body of an error
// response itself when the error is one the service models, and hands
// every other response, unchanged, to the protocol it wraps.
//
// A replay is a reservation whose condition fails, and its answer is the
// stored record, in the body of a ConditionalCheckFailedException. The
// SDK's awsJson protocol reads such a body three times: it copies it, it
// decodes it with encoding/json to find the error's type (reflection over
// the whole body, the record included), and it reads it again for the
// error's own decoder, each time into buffers that start at 512 bytes and
// grow. That was a fifth of a replay's CPU in BenchmarkSDKCompare. Here
// the body is read once into a pooled buffer, its type is found by
// errorType's scan of the top level, and the error is decoded by the
// wrapped protocol's own decoder, the one a successful response's body
// goes through, so every error is built by the SDK's code.
//
// errorType accepts only what the SDK's decoding of the type accepts and
// gives the same type; anything else (a body it is not sure of, a type in
// an escaped string, a query-compatible error) goes to the wrapped
// protocol, as does an error whose decoding fails. TestErrorProtocolIsTheSDKs
// and FuzzErrorProtocol compare the two on the same responses.
type errorProtocol struct {
	smithyhttp.ClientProtocol
}

// DeserializeResponse implements smithyhttp.ClientProtocol.
func (p *errorProtocol) DeserializeResponse(ctx context.Context, schema *smithy.OperationSchema, registry *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 || schema.Output == nil || schema.IsOutputEventStream() || resp.Header.Get("X-Amzn-Query-Error") != "" {
		return p.ClientProtocol.DeserializeResponse(ctx, schema, registry, resp, out)
	}
	buf := errorBodies.Get().(*bytes.Buffer)
	defer putErrorBody(buf)
	body := resp.Body
	// The caller closes the body it handed over, not the readers below.
	defer func() { resp.Body = body }()
	if _, err := buf.ReadFrom(body); err != nil {
		// The wrapped protocol reads what was read, then meets the
		// error itself.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf.Bytes()), body))
		return p.ClientProtocol.DeserializeResponse(ctx, schema, registry, resp, out)
	}
	data := buf.Bytes()
	if code, ok := errorType(resp.Header.Get("X-Amzn-ErrorType"), data); ok {
		if modelled, ok := registry.DeserializableError(code); ok {
			// A successful response's body is decoded into out: here,
			// the error.
			decoded := *resp.Response
			decoded.StatusCode = 200
			decoded.Body = io.NopCloser(bytes.NewReader(data))
			if p.ClientProtocol.DeserializeResponse(ctx, schema, registry, &smithyhttp.Response{Response: &decoded}, modelled) == nil {
				return modelled
			}
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return p.ClientProtocol.DeserializeResponse(ctx, schema, registry, resp, out)
}

// errorBodies are the buffers error bodies are read into.
var errorBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putErrorBody returns buf to errorBodies unless it grew past what a
// record's answer needs (DynamoDB's items are at most 400 KB).
func putErrorBody(buf *bytes.Buffer) {
	if buf.Cap() <= 512<<10 {
		buf.Reset()
		errorBodies.Put(buf)
	}
}

// errorType returns an error response's type as the SDK's awsJson
// protocol finds it (smithy-go's GetProtocolErrorInfo,
// ResolveProtocolErrorType and SanitizeErrorCode): the X-Amzn-ErrorType
// header's, else the body's "__type", else its "code" if that is a string,
// without a ":" suffix or a "#" namespace. ok is false when there is none,
// and whenever the SDK's decoding of the body with encoding/json might
// fail or find something else: a body that is not a valid JSON object, a
// top-level name that is not plain ASCII (encoding/json matches names
// without case, and folds some non-ASCII letters), a "__type" or
// "message" that is neither a string nor null, or a type that is escaped
// or not ASCII.
func errorType(header string, body []byte) (code string, ok bool) {
	var typ, codeField string
	codeIsString := false
	s := jsonScan{data: body}
	s.space()
	if !s.byte('{') {
		return "", false
	}
	s.space()
	for first := true; !s.byte('}'); first = false {
		if !first && (!s.byte(',') || !s.spaceThen()) {
			return "", false
		}
		name, isPlain, ok := s.str()
		if !ok || !isPlain || !s.spaceThen() || !s.byte(':') || !s.spaceThen() {
			return "", false
		}
		field := ""
		switch {
		case asciiEqualFold(name, "__type"):
			field = "type"
		case asciiEqualFold(name, "message"):
			field = "message"
		case asciiEqualFold(name, "code"):
			field = "code"
		}
		start := s.i
		if !s.value(0) {
			return "", false
		}
		v := body[start:s.i]
		switch {
		case string(v) == "null":
			// encoding/json leaves a string as it was, and sets an any
			// to nil.
			if field == "code" {
				codeIsString = false
			}
		case field == "" || field == "message" && v[0] == '"':
		case v[0] != '"':
			if field != "code" {
				return "", false // not a string: the SDK's decoding fails
			}
			codeIsString = false
		default:
			inner := v[1 : len(v)-1]
			if !plain(inner) {
				return "", false
			}
			if field == "type" {
				typ = string(inner)
			} else {
				codeField, codeIsString = string(inner), true
			}
		}
		s.space()
	}
	switch {
	case header != "":
		code = header
	case typ != "":
		code = typ
	case codeIsString && codeField != "":
		code = codeField
	default:
		return "", false
	}
	if i := strings.IndexByte(code, ':'); i >= 0 {
		code = code[:i]
	}
	if i := strings.IndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	return code, true
}

// plain reports whether the contents of a JSON string have no escape and
// only ASCII: encoding/json decodes them to exactly those bytes.
func plain(contents []byte) bool {
	for _, c := range contents {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// asciiEqualFold reports whether the ASCII name equals lower (in lower
// case) without regard to case.
func asciiEqualFold(name []byte, lower string) bool {
	if len(name) != len(lower) {
		return false
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// maxScanDepth is how deep errorType follows nested values before it
// leaves the body to the SDK (encoding/json allows 10000).
const maxScanDepth = 64

// jsonScan checks JSON as encoding/json's scanner does (RFC 8259: no
// control characters in strings, only its escapes, its number grammar),
// and no deeper than maxScanDepth. Invalid UTF-8 in a string is accepted,
// as encoding/json accepts it.
type jsonScan struct {
	data []byte
	i    int
}

func (s *jsonScan) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// spaceThen skips white space and reports that input remains.
func (s *jsonScan) spaceThen() bool {
	s.space()
	return s.i < len(s.data)
}

func (s *jsonScan) byte(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string and returns its contents, and whether they are
// plain; ok is false when there is no valid string.
func (s *jsonScan) str() (contents []byte, isPlain, ok bool) {
	start := s.i
	if !s.strValue() {
		return nil, false, false
	}
	contents = s.data[start+1 : s.i-1]
	return contents, plain(contents), true
}

// strValue reads a string.
func (s *jsonScan) strValue() bool {
	if !s.byte('"') {
		return false
	}
	for s.i < len(s.data) {
		c := s.data[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i >= len(s.data) {
				return false
			}
			e := s.data[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 > len(s.data) {
					return false
				}
				for _, h := range s.data[s.i : s.i+4] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// value reads one value at nesting depth.
func (s *jsonScan) value(depth int) bool {
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '"':
		return s.strValue()
	case c == '{', c == '[':
		if depth >= maxScanDepth {
			return false
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.i++
		s.space()
		if s.byte(closing) {
			return true
		}
		for {
			if c == '{' {
				if !s.strValue() || !s.spaceThen() || !s.byte(':') {
					return false
				}
				s.space()
			}
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.byte(closing) {
				return true
			}
			if !s.byte(',') {
				return false
			}
			s.space()
		}
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
			s.i += len(lit)
			return true
		}
	}
	return false
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScan) number() bool {
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.i < len(s.data) && '1' <= s.data[s.i] && s.data[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.byte('.') && !s.digits() {
		return false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits reads one digit or more.
func (s *jsonScan) digits() bool {
	start := s.i
	for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
