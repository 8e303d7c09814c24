package httpapi

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/internal/httpkey"
)

// MaxKeyLength is the longest idempotency key accepted, 255 characters, as
// Stripe allows. Longer keys are answered with ProblemInvalidKey.
const MaxKeyLength = httpkey.MaxLength

// parseKey returns the idempotency key carried by the values of the key
// header (one per header line, or several lines joined with commas). With
// no values, present is false. When the values do not carry exactly one
// valid key, reason says why, in a sentence that completes "The <header>
// header ...".
//
// Two forms are accepted: the Structured Field string of the IETF draft
// ("abc", RFC 8941 section 3.3.3) and the bare token that Stripe clients send
// (abc). Both give the key abc. A bare key may not contain a comma, because
// API Gateway HTTP APIs and Function URLs join repeated header lines with
// commas: "a,b" is two keys. Several keys, on separate lines or joined, are
// accepted only if they are the same key.
func parseKey(values []string) (key string, present bool, reason string) {
	if len(values) == 0 {
		return "", false, ""
	}
	first := true
	for _, v := range values {
		for _, member := range splitMembers(v) {
			k, reason := parseKeyValue(member)
			if reason != "" {
				return "", true, reason
			}
			if !first && k != key {
				return "", true, "carries several different keys; send one"
			}
			key, first = k, false
		}
	}
	return key, true, ""
}

// splitMembers splits a header value at the commas that join repeated
// lines: those outside quoted strings. A value without commas is one
// member.
func splitMembers(v string) []string {
	if strings.IndexByte(v, ',') < 0 {
		return []string{v}
	}
	var members []string
	start, quoted := 0, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++ // the escaped byte cannot end the string
		case c == '"' && (quoted || strings.TrimLeft(v[start:i], " \t") == ""):
			// A quote opens a string only at the start of a member.
			quoted = !quoted
		case c == ',' && !quoted:
			members = append(members, v[start:i])
			start = i + 1
		}
	}
	return append(members, v[start:])
}

// parseKeyValue parses one header line.
func parseKeyValue(v string) (key, reason string) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return "", "is empty"
	}
	if v[0] == '"' {
		var ok bool
		if key, reason, ok = parseSFString(v); !ok {
			return "", reason
		}
	} else {
		if !utf8.ValidString(v) {
			return "", "is not valid UTF-8"
		}
		key = v
	}
	return key, checkKey(key)
}

// parseSFString parses a whole header value as an RFC 8941 sf-string:
// printable ASCII between double quotes, with only \" and \\ escaped.
// Parameters after the string are not accepted: the draft defines none.
func parseSFString(v string) (s, reason string, ok bool) {
	var b strings.Builder
	escaped := false
	start := 1 // the next byte of v not yet copied to b
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			if i+1 == len(v) || v[i+1] != '"' && v[i+1] != '\\' {
				return "", `is a quoted string with an invalid escape; only \" and \\ are allowed`, false
			}
			b.WriteString(v[start:i])
			escaped = true
			i++
			start = i
		case c == '"':
			if i != len(v)-1 {
				return "", "has text after its closing quote; send one quoted string without parameters", false
			}
			if !escaped {
				return v[1:i], "", true
			}
			b.WriteString(v[start:i])
			return b.String(), "", true
		case c < 0x20 || c == 0x7f:
			return "", "contains control characters", false
		case c > 0x7f:
			return "", "is a quoted string with characters other than printable ASCII", false
		}
	}
	return "", "is a quoted string without its closing quote", false
}

var tooLong = "is longer than " + strconv.Itoa(MaxKeyLength) + " characters"

// checkKey applies the limits every key must meet, whatever its form.
func checkKey(key string) string {
	if key == "" {
		return "is empty"
	}
	n := 0
	for _, r := range key {
		if unicode.IsControl(r) {
			return "contains control characters"
		}
		n++
	}
	if n > MaxKeyLength {
		return tooLong
	}
	return ""
}
