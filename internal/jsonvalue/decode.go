package jsonvalue

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth is the deepest nesting of arrays and objects that Decode and
// FromGo accept, as in encoding/json.
const MaxDepth = 10000

// SyntaxError reports malformed JSON.
type SyntaxError struct {
	Offset int64 // byte offset of the error in the input
	msg    string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.msg)
}

// Decode parses one JSON value from data, keeping only the parts sel selects
// (nil selects everything). Numbers become float64 when that is exact, and
// json.Number otherwise. Invalid UTF-8 in strings is replaced with U+FFFD,
// as encoding/json does. Skipped parts are still checked for syntax.
func Decode(data []byte, sel *Selection) (any, error) {
	d := decoder{data: data}
	d.skipSpace()
	v, err := d.value(sel)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// end checks that nothing but spaces follows the top-level value.
func (d *decoder) end() error {
	d.skipSpace()
	if d.pos < len(d.data) {
		return d.errorf("unexpected %q after the top-level value", d.data[d.pos])
	}
	return nil
}

// Valid reports whether data is one well-formed JSON value.
func Valid(data []byte) bool {
	d := decoder{data: data}
	d.skipSpace()
	return d.skip() == nil && d.end() == nil
}

type decoder struct {
	data  []byte
	pos   int
	depth int
	// shared is set when data is the bytes of a Go string, which never
	// change: decoded strings without escapes then share its memory, as
	// substrings do, instead of copying it.
	shared bool
	// batchStrings makes short decoded strings share one buffer (see
	// makeString), which strs holds.
	batchStrings bool
	strs         []byte
	// keepPlain makes a lookup that reaches a string without escapes
	// record its bytes in plain instead of returning it as a value, which
	// would allocate.
	keepPlain bool
	plain     []byte
	hasPlain  bool
}

func (d *decoder) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: int64(d.pos), msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) unexpectedEnd() error {
	return d.errorf("unexpected end of input")
}

func (d *decoder) skipSpace() {
	// Most calls find no space at all: only that check is inlined.
	if d.pos < len(d.data) && d.data[d.pos] > ' ' {
		return
	}
	d.skipSpaces()
}

func (d *decoder) skipSpaces() { d.pos = skipSpaceAt(d.data, d.pos) }

func (d *decoder) value(sel *Selection) (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.unexpectedEnd()
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(sel)
	case c == '[':
		return d.array(sel)
	case c == '"':
		return d.string()
	case c == '-' || c >= '0' && c <= '9':
		lit, err := d.number()
		if err != nil {
			return nil, err
		}
		return numberValue(lit), nil
	default:
		return d.literal()
	}
}

// skip checks and passes over one value without keeping it.
func (d *decoder) skip() error {
	if end, ok := skipValue(d.data, d.pos, d.depth); ok {
		d.pos = end
		return nil
	}
	// skipValue tells only that something is wrong (or nested deeper than
	// it tracks): the step-by-step walk finds what.
	return d.skipChecked()
}

// skipChecked is skip step by step, reporting the first error. It never
// calls skipValue: on a malformed value, that would scan the nested
// values again at every level.
func (d *decoder) skipChecked() error {
	if d.pos >= len(d.data) {
		return d.unexpectedEnd()
	}
	switch c := d.data[d.pos]; {
	case c == '{', c == '[':
		return d.skipContainer()
	case c == '"':
		_, _, err := d.scanString()
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, err := d.number()
		return err
	default:
		_, err := d.literal()
		return err
	}
}

func (d *decoder) literal() (any, error) {
	rest := d.data[d.pos:]
	for _, lit := range [...]struct {
		text  string
		value any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if len(rest) >= len(lit.text) && string(rest[:len(lit.text)]) == lit.text {
			d.pos += len(lit.text)
			return lit.value, nil
		}
	}
	if len(rest) == 0 {
		return nil, d.unexpectedEnd()
	}
	return nil, d.errorf("unexpected %q looking for a value", rest[0])
}

func (d *decoder) enter() error {
	d.depth++
	if d.depth > MaxDepth {
		return d.errorf("nested deeper than %d", MaxDepth)
	}
	return nil
}

func (d *decoder) object(sel *Selection) (any, error) {
	obj := map[string]any{}
	err := d.eachMember(func(raw []byte, escaped bool) error {
		var name string
		var child *Selection
		var keep bool
		switch {
		case escaped:
			name = unescape(raw)
			child, keep = sel.lookup(name)
		case sel.All():
			name, child, keep = string(raw), sel, true
		default:
			if child, keep = sel.fields[string(raw)]; keep {
				name = string(raw)
			}
		}
		if !keep {
			return d.skip()
		}
		v, err := d.value(child)
		if err != nil {
			return err
		}
		obj[name] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

func (d *decoder) array(sel *Selection) (any, error) {
	arr := []any{}
	err := d.eachElement(func() error {
		v, err := d.value(sel)
		if err != nil {
			return err
		}
		arr = append(arr, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return arr, nil
}

// skipContainer passes over an object or array, checking its syntax.
func (d *decoder) skipContainer() error {
	if d.data[d.pos] == '{' {
		return d.eachMember(func([]byte, bool) error { return d.skipChecked() })
	}
	return d.eachElement(d.skipChecked)
}

// skipTracked is the deepest nesting that scanValue follows itself.
const skipTracked = 256

// skipValue returns the end of the value that starts at data[i], inside
// depth containers, and true if it is well-formed; it returns false for a
// malformed value, and for one nested more than skipTracked deep.
func skipValue(data []byte, i, depth int) (end int, ok bool) {
	end, _, ok = scanValue(data, i, depth, false, "")
	return end, ok
}

// scanValue is skipValue, and with find set, it also returns where the
// value of the object's last member named name starts (-1 if there is
// none). It is the fast way of skip and lookups: one loop over locals,
// with a bit per open container, that builds nothing.
func scanValue(data []byte, i, depth int, find bool, name string) (end, member int, ok bool) {
	var objects [skipTracked / 64]uint64 // the open containers, 1 for an object
	var n uint                           // how many are open
	object := false                      // the innermost is an object
	member = -1
	atKey := false
	for {
		if atKey {
			// At an object key, after any space; then at its value.
			atKey = false
			if i >= len(data) || data[i] != '"' {
				return i, member, false
			}
			start := i + 1
			special := false
			if j := plainEnd(data, start); j < len(data) && data[j] == '"' {
				i = j + 1
			} else if i, special, ok = skipStringRest(data, j); !ok {
				return i, member, false
			}
			matched := find && n == 1 && keyIs(data[start:i-1], special, name)
			i = skipSpaceAt(data, i)
			if i >= len(data) || data[i] != ':' {
				return i, member, false
			}
			i = skipSpaceAt(data, i+1)
			if matched {
				member = i
			}
		}
		// At a value, after any space.
		if i >= len(data) {
			return i, member, false
		}
		switch c := data[i]; c {
		case '"':
			if j := plainEnd(data, i+1); j < len(data) && data[j] == '"' {
				i = j + 1
			} else if i, _, ok = skipStringRest(data, j); !ok {
				return i, member, false
			}
		case '{', '[':
			if n == skipTracked || depth+int(n) >= MaxDepth {
				return i, member, false
			}
			i = skipSpaceAt(data, i+1)
			if i < len(data) && data[i] == c+2 { // '}' or ']'
				i++
				break
			}
			object = c == '{'
			if object {
				objects[n/64] |= 1 << (n % 64)
			} else {
				objects[n/64] &^= 1 << (n % 64)
			}
			n++
			atKey = object
			continue
		case 't':
			if !hasLiteral(data, i, "true") {
				return i, member, false
			}
			i += len("true")
		case 'f':
			if !hasLiteral(data, i, "false") {
				return i, member, false
			}
			i += len("false")
		case 'n':
			if !hasLiteral(data, i, "null") {
				return i, member, false
			}
			i += len("null")
		default:
			if i, ok = skipNumber(data, i); !ok {
				return i, member, false
			}
		}
		// After a value: the end, or what follows it in its container.
		for {
			if n == 0 {
				return i, member, true
			}
			i = skipSpaceAt(data, i)
			if i >= len(data) {
				return i, member, false
			}
			if c := data[i]; c == ',' {
				i = skipSpaceAt(data, i+1)
				atKey = object
				break
			} else if object && c == '}' || !object && c == ']' {
				i++
				n--
				object = n > 0 && objects[(n-1)/64]>>((n-1)%64)&1 != 0
				continue
			}
			return i, member, false
		}
	}
}

// keyIs reports whether the object key raw, the inside of a string, is
// name once unescaped; special is whether the string may need unescaping.
func keyIs(raw []byte, special bool, name string) bool {
	if !special {
		return string(raw) == name
	}
	var buf [64]byte
	return string(appendUnescaped(buf[:0], raw)) == name
}

// skipSpaceAt returns the index of the first byte from i on that is not
// space.
func skipSpaceAt(data []byte, i int) int {
	for i < len(data) && data[i] <= ' ' && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainEnd returns the index of the first byte from i on that is not
// plain ASCII (a quote, a backslash, a control character or a byte that
// is not ASCII). For a plain string, the usual key or value, that is its
// closing quote; scanValue inlines it, where a call per string costs.
func plainEnd(data []byte, i int) int {
	for i < len(data) && !stringOrHighStop[data[i]] {
		i++
	}
	return i
}

// skipStringRest returns the end of a string from data[i], the first byte
// of it that plainEnd stops at, and whether the string is special: has
// escapes or bytes that are not ASCII, so that its text may differ from
// its bytes. Bytes that are not ASCII need no other check: invalid UTF-8
// is accepted (and replaced when decoded).
func skipStringRest(data []byte, i int) (end int, special, ok bool) {
	for {
		if i = plainEnd(data, i); i >= len(data) {
			return i, special, false
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, special, true
		case c == '\\':
			special = true
			if i+1 >= len(data) {
				return i, special, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || hexValue(data[i+2])|hexValue(data[i+3])|hexValue(data[i+4])|hexValue(data[i+5]) < 0 {
					return i, special, false
				}
				i += 6
			default:
				return i, special, false
			}
		case c >= utf8.RuneSelf:
			// Special already: the rest of the string needs no look at
			// such bytes.
			special = true
			for i < len(data) && !stringStop[data[i]] {
				i++
			}
		default: // a control character
			return i, special, false
		}
	}
}

// stringStop marks the bytes that end a run of plain string bytes: quotes,
// backslashes and control characters; stringOrHighStop also the bytes
// that are not ASCII.
var stringStop, stringOrHighStop = func() (t, h [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	h = t
	for c := utf8.RuneSelf; c < 256; c++ {
		h[c] = true
	}
	return t, h
}()

// hasLiteral reports whether data holds lit at i.
func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// skipNumber returns the end of the number that starts at data[i], by the
// grammar number checks.
func skipNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return i, false
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		start := i + 1
		if i = skipDigits(data, start); i == start {
			return i, false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		start := i
		if i = skipDigits(data, start); i == start {
			return i, false
		}
	}
	return i, true
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// eachMember walks the object that starts at d.pos, calling member for each
// member with its key as scanString returns it, positioned at its value,
// which member must consume.
func (d *decoder) eachMember(member func(raw []byte, escaped bool) error) error {
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++ // '{'
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.unexpectedEnd()
		}
		if d.data[d.pos] != '"' {
			return d.errorf("unexpected %q looking for an object key", d.data[d.pos])
		}
		raw, escaped, err := d.scanString()
		if err != nil {
			return err
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.unexpectedEnd()
		}
		if d.data[d.pos] != ':' {
			return d.errorf("unexpected %q after an object key", d.data[d.pos])
		}
		d.pos++
		d.skipSpace()
		if err := member(raw, escaped); err != nil {
			return err
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.unexpectedEnd()
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			return nil
		default:
			return d.errorf("unexpected %q after an object member", d.data[d.pos])
		}
	}
}

// eachElement walks the array that starts at d.pos, calling element
// positioned at each element, which element must consume.
func (d *decoder) eachElement(element func() error) error {
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++ // '['
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		d.skipSpace()
		if err := element(); err != nil {
			return err
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.unexpectedEnd()
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.errorf("unexpected %q after an array element", d.data[d.pos])
		}
	}
}

func (d *decoder) string() (any, error) {
	s, err := d.stringValue()
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (d *decoder) stringValue() (string, error) {
	raw, escaped, err := d.scanString()
	if err != nil {
		return "", err
	}
	return d.makeString(raw, escaped), nil
}

// Strings of up to batchedString bytes decoded with batchStrings set share
// buffers of up to stringBatch bytes: one allocation for the names and
// short values of a whole response instead of one per string. A string
// kept from the decode keeps at most stringBatch bytes alive.
const (
	batchedString = 256
	stringBatch   = 1024
)

// makeString returns the string that raw, the inside of a JSON string,
// encodes (unescaped if escaped).
func (d *decoder) makeString(raw []byte, escaped bool) string {
	switch {
	case len(raw) == 0:
		return ""
	case d.shared && !escaped:
		return unsafe.String(unsafe.SliceData(raw), len(raw))
	case !d.batchStrings || len(raw) > batchedString:
		if escaped {
			return unescape(raw)
		}
		return string(raw)
	}
	if cap(d.strs)-len(d.strs) < len(raw)+utf8.UTFMax {
		// What is left of the document bounds what is left to decode.
		d.strs = make([]byte, 0, max(len(raw)+utf8.UTFMax, min(len(d.data)-d.pos+len(raw), stringBatch)))
	}
	// Bytes are only ever appended to the buffer, never rewritten, so the
	// strings that view it do not change. (Should unescaping outgrow it,
	// append moves the rest to a new buffer and this string views that.)
	start := len(d.strs)
	if escaped {
		d.strs = appendUnescaped(d.strs, raw)
	} else {
		d.strs = append(d.strs, raw...)
	}
	return unsafe.String(&d.strs[start], len(d.strs)-start)
}

// scanString passes over a string starting at its opening quote. It returns
// the bytes between the quotes, and whether they need unescaping (escape
// sequences or invalid UTF-8).
func (d *decoder) scanString() (raw []byte, escaped bool, err error) {
	// data and i are locals so that the loop keeps them in registers.
	data := d.data
	start := d.pos + 1 // after '"'
	i := start
	for {
		if i = plainEnd(data, i); i >= len(data) {
			d.pos = i
			return nil, false, d.unexpectedEnd()
		}
		switch c := data[i]; {
		case c == '"':
			d.pos = i + 1
			return data[start:i], escaped, nil
		case c == '\\':
			escaped = true
			d.pos = i
			if err := d.scanEscape(); err != nil {
				return nil, false, err
			}
			i = d.pos
		case c < 0x20:
			d.pos = i
			return nil, false, d.errorf("control character %q in a string", c)
		default: // the first byte of a multi-byte sequence, or an invalid one
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				escaped = true
			}
			i += size
		}
	}
}

func (d *decoder) scanEscape() error {
	d.pos++ // '\\'
	if d.pos >= len(d.data) {
		return d.unexpectedEnd()
	}
	switch d.data[d.pos] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.pos++
		return nil
	case 'u':
		if d.pos+5 > len(d.data) {
			return d.unexpectedEnd()
		}
		for _, h := range d.data[d.pos+1 : d.pos+5] {
			if hexValue(h) < 0 {
				return d.errorf("invalid \\u escape")
			}
		}
		d.pos += 5
		return nil
	default:
		return d.errorf("invalid escape \\%c", d.data[d.pos])
	}
}

func hexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// unescape decodes the inside of a string that scanString has checked,
// replacing invalid UTF-8 and unpaired surrogates with U+FFFD as
// encoding/json does.
func unescape(raw []byte) string {
	// The buffer becomes the string itself: nothing else refers to it.
	b := appendUnescaped(make([]byte, 0, len(raw)+utf8.UTFMax), raw)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendUnescaped appends the decoded inside of a string to b, as
// unescape returns it.
func appendUnescaped(b, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && raw[i+1] == 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				dec := utf8.RuneError
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					dec = utf16.DecodeRune(r, hex4(raw[i+2:]))
				}
				if dec != utf8.RuneError {
					i += 6
				}
				r = dec
			}
			b = utf8.AppendRune(b, r)
		case c == '\\':
			switch e := raw[i+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			default: // '"', '\\', '/'
				b = append(b, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			b = utf8.AppendRune(b, r) // U+FFFD for an invalid byte
			i += size
		}
	}
	return b
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r = r<<4 | rune(hexValue(c))
	}
	return r
}

// number passes over a number, checking the JSON grammar, and returns its
// literal.
func (d *decoder) number() ([]byte, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos >= len(d.data):
		return nil, d.unexpectedEnd()
	case d.data[d.pos] == '0':
		d.pos++
	case d.data[d.pos] >= '1' && d.data[d.pos] <= '9':
		d.digits()
	default:
		return nil, d.errorf("invalid number")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if d.digits() == 0 {
			return nil, d.errorf("invalid number: no digits after the decimal point")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if d.digits() == 0 {
			return nil, d.errorf("invalid number: no digits in the exponent")
		}
	}
	return d.data[start:d.pos], nil
}

func (d *decoder) digits() int {
	start := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	return d.pos - start
}

// numberValue returns a float64 when it represents lit exactly, else a
// json.Number holding lit.
func numberValue(lit []byte) any {
	// Integers of up to 15 digits are always exact in a float64.
	if len(lit) <= 15 && isPlainInteger(lit) {
		n, _ := strconv.ParseInt(string(lit), 10, 64)
		return float64(n)
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err == nil && exactFloat(f, lit) {
		return f
	}
	return json.Number(lit)
}

func isPlainInteger(lit []byte) bool {
	for i, c := range lit {
		if c == '-' && i == 0 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// exactFloat reports whether f, written in its shortest form, is the same
// number as lit.
func exactFloat(f float64, lit []byte) bool {
	var a, b [64]byte
	short := strconv.AppendFloat(a[:0], f, 'g', -1, 64)
	n1, ok1 := appendNumber(b[:0], short)
	var c [64]byte
	n2, ok2 := appendNumber(c[:0], lit)
	return ok1 && ok2 && string(n1) == string(n2)
}
