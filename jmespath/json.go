package jmespath

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/internal/canonical"
)

// parseJSON decodes doc as canonical.Parse does, with the numbers that
// exactNumbers gives.
func parseJSON(doc []byte) (any, error) {
	v, err := canonical.Parse(doc)
	if err != nil {
		return nil, err
	}
	return exactNumbers(v), nil
}

// exactNumbers replaces, in place, each json.Number in the generic value v
// that a float64 represents exactly with that float64, and returns v: the
// interpreter compares and computes with float64s only, and a large
// integer ID stays exact.
func exactNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return exactNumber(v)
	case []any:
		for i, e := range v {
			v[i] = exactNumbers(e)
		}
	case map[string]any:
		for name, e := range v {
			v[name] = exactNumbers(e)
		}
	}
	return v
}

// exactNumber returns n as a float64 when the float64 nearest to n, in its
// shortest form, is the same number, else n.
func exactNumber(n json.Number) any {
	s := string(n)
	if len(s) <= 15 && plainInteger(s) {
		// Integers of up to 15 digits are always exact.
		i, _ := strconv.ParseInt(s, 10, 64)
		return float64(i)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return n
	}
	var a, b [32]byte
	short, _ := canonical.Append(a[:0], f)
	written, _ := canonical.Append(b[:0], n)
	if string(short) == string(written) {
		return f
	}
	return n
}

func plainInteger(s string) bool {
	for i := range len(s) {
		if (s[i] < '0' || s[i] > '9') && (i > 0 || s[i] != '-') {
			return false
		}
	}
	return true
}

// The lookups below find a value in JSON text that json.Valid accepted,
// so they only look for where values start and end, by the grammar of RFC
// 8259 that encoding/json's scanner (scanner.go) checks: a string ends at
// the first '"' after its opening one that no '\\' escapes, an object or
// array at the bracket that balances its opening one outside strings, a
// number or literal at the first ',', '}', ']' or white space. The value
// found is then decoded by encoding/json (through decodeValue). They are
// tested against encoding/json (TestLookupsMatchEncodingJSON).
//
// They exist for the usual key expression, powertools_json(body).order_id,
// which every replay runs: on the 1 KB API Gateway event's body the lookup
// takes 1.1 to 1.5 µs and 2 allocations, against 5.2 to 5.5 µs and 45 for
// decoding the body whole with encoding/json (BenchmarkBodyMember), in a
// replay of about 6 µs in all (BenchmarkWrap).

// member returns the JSON text of the value of the member s.name of the
// object whose text is doc: of the last one, as encoding/json keeps the
// last of members with the same name. It is nil if doc is not an object or
// has no such member.
func member(doc []byte, s step) []byte {
	i := skipSpace(doc, 0)
	if i == len(doc) || doc[i] != '{' {
		return nil
	}
	var found []byte
	for i = skipSpace(doc, i+1); doc[i] == '"'; {
		end := stringEnd(doc, i)
		name := doc[i:end]
		i = skipSpace(doc, skipSpace(doc, end)+1) // past the ':'
		end = valueEnd(doc, i)
		if nameIs(name, s) {
			found = doc[i:end]
		}
		if i = skipSpace(doc, end); doc[i] == ',' {
			i = skipSpace(doc, i+1)
		}
	}
	return found
}

// nameIs reports whether the JSON string name decodes to s.name.
func nameIs(name []byte, s step) bool {
	raw := name[1 : len(name)-1]
	if s.plain && bytes.IndexByte(raw, '\\') < 0 {
		// Without escapes the name is its bytes, but for invalid UTF-8,
		// which encoding/json replaces with U+FFFD, so never equal to
		// s.name.
		return string(raw) == s.name
	}
	var decoded string
	return json.Unmarshal(name, &decoded) == nil && decoded == s.name
}

// element returns the JSON text of the index-th element of the array
// whose text is doc (counted from the end when index is negative), nil if
// doc is not an array or has no such element.
func element(doc []byte, index int) []byte {
	i := skipSpace(doc, 0)
	if i == len(doc) || doc[i] != '[' {
		return nil
	}
	if index < 0 {
		_, n := nth(doc, i, -1)
		if index += n; index < 0 {
			return nil
		}
	}
	v, _ := nth(doc, i, index)
	return v
}

// nth returns the index-th element of the array that starts at doc[i], or
// nil and the number of elements.
func nth(doc []byte, i, index int) ([]byte, int) {
	n := 0
	for i = skipSpace(doc, i+1); doc[i] != ']'; n++ {
		end := valueEnd(doc, i)
		if n == index {
			return doc[i:end], n
		}
		if i = skipSpace(doc, end); doc[i] == ',' {
			i = skipSpace(doc, i+1)
		}
	}
	return nil, n
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the end of the string that starts at doc[i].
func stringEnd(doc []byte, i int) int {
	for i++; ; i++ {
		i += bytes.IndexByte(doc[i:], '"')
		escapes := 0
		for doc[i-1-escapes] == '\\' {
			escapes++
		}
		if escapes%2 == 0 {
			return i + 1
		}
	}
}

// valueEnd returns the end of the value that starts at doc[i].
func valueEnd(doc []byte, i int) int {
	switch doc[i] {
	case '"':
		return stringEnd(doc, i)
	case '{', '[':
		for depth := 0; ; i++ {
			switch doc[i] {
			case '"':
				i = stringEnd(doc, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(doc) && doc[i] != ',' && doc[i] != '}' && doc[i] != ']' && skipSpace(doc, i) == i {
		i++
	}
	return i
}

// decodeValue decodes the JSON text of a value found by member or element
// as parseJSON does. A string without escapes is its bytes, when they are
// valid UTF-8: the decoding of the usual key needs no decoder.
func decodeValue(v []byte) (any, error) {
	if len(v) > 1 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v[1:len(v)-1], '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), nil
	}
	return parseJSON(v)
}
