package jsonvalue

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendCanonical appends the canonical JSON encoding of v to dst. v must be
// a generic value as Decode and FromGo return it (float64 and json.Number
// for numbers; other Go number types are accepted too).
//
// The encoding is the same for equal values: object members are sorted by
// key (bytewise), numbers are written in one normal form without changing
// their value (1.0, 1e0 and 1 are all "1"; 12345678901234567890 stays
// exact), strings escape only '"', '\' and control characters, and there is
// no insignificant space.
func AppendCanonical(dst []byte, v any) ([]byte, error) {
	return appendCanonical(dst, v, 0)
}

func appendCanonical(dst []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("jsonvalue: value nested deeper than %d", MaxDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return appendString(dst, v), nil
	case float64:
		return appendFloat(dst, v)
	case json.Number:
		out, ok := appendNumber(dst, []byte(v))
		if !ok {
			return dst, fmt.Errorf("jsonvalue: invalid number %q", string(v))
		}
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
			if dst, err = appendCanonical(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendCanonical(dst, v[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	default:
		return dst, fmt.Errorf("jsonvalue: cannot encode %T as canonical JSON", v)
	}
}

func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("jsonvalue: cannot encode %v as JSON", f)
	}
	var buf [32]byte
	out, _ := appendNumber(dst, strconv.AppendFloat(buf[:0], f, 'g', -1, 64))
	return out, nil
}

// appendNumber appends the normal form of the JSON number literal lit (Go's
// 'g' formatting is accepted too) and reports whether lit was a number.
//
// The normal form of a number with significant digits D (no leading or
// trailing zeros) and decimal point after position p is: D padded with zeros
// when it is an integer of at most 21 digits; D with a point inside when
// 0 < p < len(D); "0." and zeros then D when -6 < p <= 0; otherwise
// "d.ddde<p-1>". Zero, including -0, is "0".
func appendNumber(dst []byte, lit []byte) ([]byte, bool) {
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
	var frac []byte
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
				// An exponent this large has no normal form we can compute
				// cheaply; keep the literal, which is still deterministic.
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

	// The significant digits are intPart followed by frac; digit(k) reads
	// them without copying.
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
	count := last - first
	if neg {
		dst = append(dst, '-')
	}
	switch {
	case point >= count && point <= 21:
		for k := first; k < last; k++ {
			dst = append(dst, digit(k))
		}
		for range point - count {
			dst = append(dst, '0')
		}
	case point > 0 && point < count:
		for k := first; k < last; k++ {
			if k-first == point {
				dst = append(dst, '.')
			}
			dst = append(dst, digit(k))
		}
	case point <= 0 && point > -6:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		for k := first; k < last; k++ {
			dst = append(dst, digit(k))
		}
	default:
		dst = append(dst, digit(first))
		if count > 1 {
			dst = append(dst, '.')
			for k := first + 1; k < last; k++ {
				dst = append(dst, digit(k))
			}
		}
		dst = append(dst, 'e')
		dst = strconv.AppendInt(dst, int64(point-1), 10)
	}
	return dst, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping only what JSON requires:
// '"', '\' and control characters. Invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte { return appendQuoted(dst, s, &plainSafe, false) }

// appendStringHTML appends s as a JSON string, escaped exactly as
// encoding/json escapes it by default: <, > and & as \u escapes (HTML
// safety), U+2028 and U+2029 too, and invalid UTF-8 as the escape \ufffd.
func appendStringHTML(dst []byte, s string) []byte { return appendQuoted(dst, s, &htmlSafe, true) }

// plainSafe and htmlSafe hold true for the ASCII bytes appendString and
// appendStringHTML write as they are.
var plainSafe, htmlSafe = func() (plain, html [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
		html[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return plain, html
}()

// appendQuoted appends s as a JSON string, writing the ASCII bytes safe
// holds as they are and escaping the others; control characters get the
// short escapes JSON has. asEncodingJSON selects encoding/json's rules for
// the rest: U+2028 and U+2029 escaped, and invalid UTF-8 as \ufffd rather
// than U+FFFD itself.
func appendQuoted(dst []byte, s string, safe *[utf8.RuneSelf]bool, asEncodingJSON bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			if asEncodingJSON {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, "\uFFFD"...)
			}
		case asEncodingJSON && (r == '\u2028' || r == '\u2029'):
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
