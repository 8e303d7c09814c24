// Package canonical writes JSON values in the one form from which
// idempotency keys are hashed, so that equal values give equal bytes
// whatever the order of their members or the spelling of their numbers.
// docs/keys.md specifies the form, with test vectors.
//
// Values come from encoding/json: FromGo encodes a Go value with
// json.Marshal and decodes the result, Parse decodes a document, both with
// json.Decoder.UseNumber so that no number is rounded, and Append writes
// what they return. AppendGo writes the same bytes as FromGo and Append
// from encoding/json's output directly, without decoding it.
package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FromGo returns v as encoding/json encodes it (json.Marshal), decoded into
// the generic form that Append writes: map[string]any, []any, string,
// json.Number, bool and nil. v is encoded as passed: a value, not a
// pointer to it, so methods with pointer receivers are not called on it,
// as json.Marshal does not call them.
func FromGo(v any) (any, error) {
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Parse(doc)
}

// Parse decodes the JSON document doc into the generic form that Append
// writes, with numbers as json.Number. It reports encoding/json's errors,
// and an error for data after the value. As encoding/json does, it
// replaces invalid UTF-8 in strings with U+FFFD, keeps the last of
// members with the same name, and refuses nesting deeper than 10000.
func Parse(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("canonical: invalid JSON: data after the value")
	}
	return v, nil
}

// Append appends the canonical form of the generic JSON value v to dst:
//
//   - object members sorted by name, bytewise;
//   - numbers in one form for one value (see appendNumber): 1, 1.0 and
//     1e0 are all 1, and 12345678901234567890 stays exact;
//   - strings with only '"', '\' and control characters escaped, and
//     invalid UTF-8 replaced with U+FFFD;
//   - no space between tokens.
//
// v is what FromGo and Parse return (float64, int and int64 numbers are
// accepted too); any other type is an error.
func Append(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return appendString(dst, v), nil
	case json.Number:
		out, ok := appendNumber(dst, string(v))
		if !ok {
			return dst, fmt.Errorf("canonical: invalid number %q", string(v))
		}
		return out, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return dst, fmt.Errorf("canonical: %v is not a JSON number", v)
		}
		out, _ := appendNumber(dst, strconv.FormatFloat(v, 'g', -1, 64))
		return out, nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = Append(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		names, err := sortedNames(v)
		if err != nil {
			return dst, err
		}
		dst = append(dst, '{')
		for i, name := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, name)
			dst = append(dst, ':')
			if dst, err = Append(dst, v[name]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("canonical: %T is not a JSON value", v)
}

// sortedNames returns the names of the members of m, sorted bytewise as
// they are written: with invalid UTF-8 replaced. Two names that differ
// only in invalid UTF-8 are one name once written, an error. (FromGo and
// Parse never return such names: encoding/json replaces invalid UTF-8.)
func sortedNames(m map[string]any) ([]string, error) {
	names := make([]string, 0, len(m))
	valid := true
	for name := range m {
		names = append(names, name)
		valid = valid && utf8.ValidString(name)
	}
	if valid {
		slices.Sort(names)
		return names, nil
	}
	written := make(map[string]string, len(names))
	for _, name := range names {
		written[name] = replaceInvalid(name)
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(written[a], written[b]) })
	for i := 1; i < len(names); i++ {
		if written[names[i]] == written[names[i-1]] {
			return nil, fmt.Errorf("canonical: two members are both named %q once invalid UTF-8 is replaced", written[names[i]])
		}
	}
	return names, nil
}

// replaceInvalid returns s with each byte that does not start a valid
// UTF-8 character replaced with U+FFFD, as encoding/json replaces them.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// NoKey reports whether the generic value v selects no key: null, "", or
// an array or object whose every element is null (none included), as
// Powertools decides.
func NoKey(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		for _, e := range v {
			if e != nil {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if e != nil {
				return false
			}
		}
		return true
	}
	return false
}

// appendNumber appends the canonical form of the JSON number literal lit
// (strconv's 'g' format is accepted too) and reports whether lit was a
// number.
//
// The form keeps the value exactly. With the significant digits D (no
// leading or trailing zeros) and the decimal point after position p of D,
// it is: D followed by zeros, when it is an integer of at most 21 digits;
// D with a point inside, when 0 < p < len(D); "0." then -p zeros then D,
// when -6 < p <= 0; otherwise the first digit, a point and the others if
// any, "e" and p-1. Zero, and -0, is 0; negative numbers start with '-'.
// These are the forms of JavaScript's Number.prototype.toString, without
// its rounding to a double.
func appendNumber[T string | []byte](dst []byte, lit T) ([]byte, bool) {
	i := 0
	neg := false
	if i < len(lit) && (lit[i] == '-' || lit[i] == '+') {
		neg = lit[i] == '-'
		i++
	}
	intStart := i
	for i < len(lit) && isDigit(lit[i]) {
		i++
	}
	intPart := lit[intStart:i]
	frac := lit[i:i]
	if i < len(lit) && lit[i] == '.' {
		i++
		fracStart := i
		for i < len(lit) && isDigit(lit[i]) {
			i++
		}
		frac = lit[fracStart:i]
	}
	if len(intPart) == 0 && len(frac) == 0 {
		return dst, false
	}
	exp := 0
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		expNeg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			expNeg = lit[i] == '-'
			i++
		}
		if i == len(lit) {
			return dst, false
		}
		for ; i < len(lit) && isDigit(lit[i]); i++ {
			if exp > 1e8 {
				// An exponent this large has no form worth computing; the
				// literal itself is still one form for one spelling.
				return append(dst, lit...), true
			}
			exp = exp*10 + int(lit[i]-'0')
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(lit) {
		return dst, false
	}

	// The digits are intPart then frac; digit(k) is the k-th of them.
	n := len(intPart) + len(frac)
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	point := len(intPart) + exp
	first := 0
	for first < n && digit(first) == '0' {
		first++
	}
	if first == n {
		return append(dst, '0'), true
	}
	last := n
	for digit(last-1) == '0' {
		last--
	}
	point -= first
	// D is digits[first:last]; appendD appends D[from:to].
	lenD := last - first
	appendD := func(dst []byte, from, to int) []byte {
		from, to = first+from, first+to
		if from < len(intPart) {
			dst = append(dst, intPart[from:min(to, len(intPart))]...)
		}
		if to > len(intPart) {
			dst = append(dst, frac[max(from, len(intPart))-len(intPart):to-len(intPart)]...)
		}
		return dst
	}
	if neg {
		dst = append(dst, '-')
	}
	switch {
	case point >= lenD && point <= 21:
		dst = appendD(dst, 0, lenD)
		for range point - lenD {
			dst = append(dst, '0')
		}
	case point > 0 && point < lenD:
		dst = appendD(dst, 0, point)
		dst = append(dst, '.')
		dst = appendD(dst, point, lenD)
	case point <= 0 && point > -6:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		dst = appendD(dst, 0, lenD)
	default:
		dst = append(dst, digit(first))
		if lenD > 1 {
			dst = append(dst, '.')
			dst = appendD(dst, 1, lenD)
		}
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, int64(point-1), 10)
	}
	return dst, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// appendString appends s as a JSON string with only what JSON requires
// escaped: '"' and '\' with a backslash, control characters with their
// short escapes (\b, \f, \n, \r, \t) or \u00xx in lower-case hex. Invalid
// UTF-8 becomes U+FFFD, one for each byte that does not start a character.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				start = i + 1
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendByte(dst, c)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendByte appends the ASCII character c as appendString writes it.
func appendByte(dst []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if c < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
	}
	return append(dst, c)
}
