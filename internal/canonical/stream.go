package canonical

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// The whole input's key is the canonical form of json.Marshal's output.
// AppendGo writes it from that output in two passes over its bytes, where
// FromGo and Append decode it into map[string]any and write that. The
// first pass writes strings and numbers in canonical form where they are
// not, and records the members of each object that is out of order. The
// second writes those members in order.
//
// Both ways give the same bytes. TestAppendGoMatchesEncodingJSON and
// FuzzAppendGo compare them over Go values of many kinds, the code that
// decodes kept in reference_test.go as it was, and FuzzAppendDoc over any
// document that json.Valid accepts. On the 1 KB API Gateway
// event of the benchmarks AppendGo takes about 6 µs and 18 allocations,
// all encoding/json's, where FromGo and Append take 35 µs and 131
// (BenchmarkAppendGo). A replay with the whole input as its key takes
// 10 µs instead of 40 (BenchmarkWrap/replay/whole_input).

// maxDepth is how deep encoding/json decodes nested arrays and objects.
const maxDepth = 10000

// errDepth is the error for JSON that encoding/json does not decode.
var errDepth = errors.New("canonical: JSON nested deeper than 10000 levels, which encoding/json does not decode")

// AppendGo appends the canonical form of v as encoding/json encodes it
// (json.Marshal) to dst: the bytes that Append writes for FromGo(v). It
// reports json.Marshal's errors, and an error for nesting deeper than
// 10000, which encoding/json does not decode.
func AppendGo(dst []byte, v any) ([]byte, error) {
	w := writers.Get().(*writer)
	defer putWriter(w)
	// An Encoder writes what json.Marshal returns, and a newline, here
	// into a buffer that is used again.
	w.in = w.in[:0]
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return dst, err
	}
	return w.appendDoc(dst, w.in)
}

// NoKeyForm reports whether the canonical form form is of a value for
// which NoKey is true: null, "", or an array or object whose every element
// is null.
func NoKeyForm(form []byte) bool {
	if len(form) < 2 {
		return false
	}
	switch form[0] {
	case 'n', '"':
		return string(form) == "null" || string(form) == `""`
	case '[':
		for i := 1; form[i] != ']'; {
			if !bytes.HasPrefix(form[i:], []byte("null")) {
				return false
			}
			if i += len("null"); form[i] == ',' {
				i++
			}
		}
		return true
	case '{':
		for i := 1; form[i] != '}'; {
			i = stringEnd(form, i) + 1 // past the ':'
			if !bytes.HasPrefix(form[i:], []byte("null")) {
				return false
			}
			if i += len("null"); form[i] == ',' {
				i++
			}
		}
		return true
	}
	return false
}

// writers keeps the writers' buffers from one call to the next.
var writers = sync.Pool{New: func() any { return new(writer) }}

// putWriter returns w to writers, unless its buffers grew too large to
// keep.
func putWriter(w *writer) {
	if cap(w.in)+cap(w.out) > 128<<10 || cap(w.open)+cap(w.moved)+cap(w.objs) > 4<<10 {
		return
	}
	writers.Put(w)
}

// A writer writes the canonical form of a JSON document that json.Valid
// accepts, such as json.Marshal's output, and relies on its validity.
type writer struct {
	in    []byte   // what Write was given
	doc   []byte   // the document
	out   []byte   // its canonical form, but for the order of members
	open  []member // the members of the objects being written, innermost last
	moved []span   // the members of the objects out of order, in order
	objs  []object // the objects out of order
	order []int    // sort's
	run   int      // see flush
	depth int
	esc   bool // whether the last string written has an escape
}

// A member is the name, ':' and value of an object member in out:
// out[start:end], its name out[start:colon]. esc is whether the name has
// an escape, and prefix is the first 8 bytes of the string it is, big
// endian, zeros after a shorter one.
type member struct {
	start, colon, end int
	prefix            uint64
	esc               bool
}

// A span is out[start:end].
type span struct{ start, end int }

// An object out of order is out[start:end], whose members in order are
// moved[first:last].
type object struct{ start, end, first, last int }

// Write appends p to w.in.
func (w *writer) Write(p []byte) (int, error) {
	w.in = append(w.in, p...)
	return len(p), nil
}

// appendDoc appends the canonical form of doc to dst.
func (w *writer) appendDoc(dst, doc []byte) ([]byte, error) {
	w.doc, w.out, w.open, w.moved, w.objs, w.depth, w.run = doc, w.out[:0], w.open[:0], w.moved[:0], w.objs[:0], 0, 0
	end, err := w.value(w.space(0))
	if err != nil {
		return dst, err
	}
	w.flush(end)
	if len(w.objs) == 0 {
		return append(dst, w.out...), nil
	}
	// Objects are recorded as they end, inner ones first; they are found
	// by where they start.
	slices.SortFunc(w.objs, func(a, b object) int { return a.start - b.start })
	return w.appendSpan(dst, 0, len(w.out), 0), nil
}

// appendSpan appends out[start:end] to dst, with the objects out of order
// in it put in order. objs[k:] are the objects that start at or after
// start.
func (w *writer) appendSpan(dst []byte, start, end, k int) []byte {
	for k < len(w.objs) && w.objs[k].start < end {
		o := w.objs[k]
		dst = append(dst, w.out[start:o.start]...)
		dst = append(dst, '{')
		// The objects in o are objs[k+1:next].
		next := w.after(o.end, k+1)
		for i, m := range w.moved[o.first:o.last] {
			if i > 0 {
				dst = append(dst, ',')
			}
			if next == k+1 {
				dst = append(dst, w.out[m.start:m.end]...)
			} else {
				dst = w.appendSpan(dst, m.start, m.end, w.after(m.start, k+1))
			}
		}
		dst = append(dst, '}')
		start = o.end
		k = next
	}
	return append(dst, w.out[start:end]...)
}

// after returns the index of the first object in objs[k:] that starts at
// or after i.
func (w *writer) after(i, k int) int {
	j, _ := slices.BinarySearchFunc(w.objs[k:], i, func(o object, i int) int { return o.start - i })
	return k + j
}

// The first pass writes out lazily. The canonical form of doc[:i] is out
// followed by doc[run:i]: the bytes from run on are as they are in doc
// until something else has to be written, which flush makes room for.

// flush writes doc[run:i] to out and starts the run at i.
func (w *writer) flush(i int) {
	w.out = append(w.out, w.doc[w.run:i]...)
	w.run = i
}

// pos returns the index in out of the canonical form of doc[i:].
func (w *writer) pos(i int) int { return len(w.out) + i - w.run }

// space returns the index of the first byte from doc[i] that is not white
// space, leaving the white space out.
func (w *writer) space(i int) int {
	j := i
	for j < len(w.doc) && w.doc[j] <= ' ' {
		j++
	}
	if j > i {
		w.flush(i)
		w.run = j
	}
	return j
}

// value writes the value that starts at doc[i] and returns the index
// after it.
func (w *writer) value(i int) (int, error) {
	switch c := w.doc[i]; c {
	case '{':
		return w.object(i)
	case '[':
		return w.array(i)
	case '"':
		end, _ := w.string(i)
		return end, nil
	case 't', 'n':
		return i + 4, nil
	case 'f':
		return i + 5, nil
	}
	return w.number(i), nil
}

func (w *writer) array(i int) (int, error) {
	if w.depth++; w.depth > maxDepth {
		return i, errDepth
	}
	i = w.space(i + 1)
	for n := 0; w.doc[i] != ']'; n++ {
		if n > 0 {
			i = w.space(i + 1) // past the ','
		}
		var err error
		if i, err = w.value(i); err != nil {
			return i, err
		}
		i = w.space(i)
	}
	w.depth--
	return i + 1, nil
}

func (w *writer) object(i int) (int, error) {
	if w.depth++; w.depth > maxDepth {
		return i, errDepth
	}
	start := w.pos(i)
	base := len(w.open)
	i = w.space(i + 1)
	for n := 0; w.doc[i] != '}'; n++ {
		if n > 0 {
			i = w.space(i + 1) // past the ','
		}
		// The member's fields are written one by one: a member copied
		// whole right after its fields were written costs more.
		j := len(w.open)
		w.open = append(w.open, member{})
		m := &w.open[j]
		m.start = w.pos(i)
		nameStart := i
		var edited bool
		i, edited = w.string(i)
		m.esc = w.esc
		if edited {
			// The name as written is in out, whole.
			w.flush(i)
			m.prefix = prefix(w.out[m.start+1:w.pos(i)-1], m.esc)
		} else {
			m.prefix = prefix(w.doc[nameStart+1:i-1], m.esc)
		}
		i = w.space(i)
		m.colon = w.pos(i)
		var err error
		if i, err = w.value(w.space(i + 1)); err != nil {
			return i, err
		}
		w.open[j].end = w.pos(i) // w.open may have moved
		i = w.space(i)
	}
	w.depth--
	// The names are compared in out.
	w.flush(i + 1)
	if members := w.open[base:]; !w.inOrder(members) {
		order := w.sort(members)
		first := len(w.moved)
		for j, k := range order {
			// Of members with one name, the last counts.
			if j+1 == len(order) || w.compareNames(&members[k], &members[order[j+1]]) != 0 {
				w.moved = append(w.moved, span{members[k].start, members[k].end})
			}
		}
		w.objs = append(w.objs, object{start: start, end: w.pos(i + 1), first: first, last: len(w.moved)})
	}
	w.open = w.open[:base]
	return i + 1, nil
}

// inOrder reports whether members are sorted by name, without two of one
// name.
func (w *writer) inOrder(members []member) bool {
	for j := 1; j < len(members); j++ {
		if !w.less(&members[j-1], &members[j]) {
			return false
		}
	}
	return true
}

// sort returns the indexes of members sorted by their names, those of
// members with one name in the order they came.
func (w *writer) sort(members []member) []int {
	order := w.order[:0]
	for j := range members {
		order = append(order, j)
	}
	w.order = order
	if len(members) > 32 {
		slices.SortFunc(order, func(a, b int) int {
			if c := w.compareNames(&members[a], &members[b]); c != 0 {
				return c
			}
			return a - b
		})
		return order
	}
	for j := 1; j < len(order); j++ {
		m := &members[j]
		k := j
		for k > 0 && w.less(m, &members[order[k-1]]) {
			order[k] = order[k-1]
			k--
		}
		order[k] = j
	}
	return order
}

// less reports whether the name of a sorts before that of b.
func (w *writer) less(a, b *member) bool {
	if a.prefix != b.prefix {
		return a.prefix < b.prefix
	}
	return w.compareNames(a, b) < 0
}

// compareNames compares the names of a and b as the strings they are,
// bytewise: as written in canonical form, but for their escapes, which
// each stand for one byte.
func (w *writer) compareNames(a, b *member) int {
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	x, y := w.out[a.start+1:a.colon-1], w.out[b.start+1:b.colon-1]
	if !a.esc && !b.esc {
		return bytes.Compare(x, y)
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		var c, d byte
		c, i = unescape(x, i)
		d, j = unescape(y, j)
		if c != d {
			return int(c) - int(d)
		}
	}
	return (len(x) - i) - (len(y) - j)
}

// prefix returns the first 8 bytes of the string that the contents of a
// string in canonical form are, big endian, with zeros after a shorter
// one. Comparing prefixes compares strings, but for those that have the
// same first 8 bytes, or differ only by zeros after them.
func prefix(s []byte, esc bool) uint64 {
	if !esc {
		if len(s) >= 8 {
			return binary.BigEndian.Uint64(s)
		}
		var p uint64
		for _, c := range s {
			p = p<<8 | uint64(c)
		}
		return p << (8 * (8 - len(s)))
	}
	var p uint64
	n := 0
	for i := 0; i < len(s) && n < 8; n++ {
		var c byte
		c, i = unescape(s, i)
		p = p<<8 | uint64(c)
	}
	return p << (8 * (8 - n))
}

// unescape returns the byte that s[i:] starts with in a string in
// canonical form, and the index after it.
func unescape(s []byte, i int) (byte, int) {
	if s[i] != '\\' {
		return s[i], i + 1
	}
	switch s[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u': // \u00xx, lower-case
		return unhex(s[i+4])<<4 | unhex(s[i+5]), i + 6
	}
	return s[i+1], i + 2 // '"' or '\\'
}

func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// plain are the bytes that a string in canonical form has as they are in
// JSON text: ASCII but for '"', '\\' and control characters.
var plain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// string writes the string that starts at doc[i] in canonical form, as
// appendString writes it once encoding/json has decoded it. It returns
// the index after it, and whether it wrote other bytes than the string's.
// Escapes such as \" and \n are written as they are.
func (w *writer) string(i int) (int, bool) {
	doc := w.doc
	w.esc = false
	edited := false
	for i++; ; {
		i = plainRun(doc, i)
		switch c := doc[i]; {
		case c == '"':
			return i + 1, edited
		case c >= utf8.RuneSelf:
			// As encoding/json decodes: each byte that does not start a
			// character is U+FFFD.
			r, size := utf8.DecodeRune(doc[i:])
			if r == utf8.RuneError && size == 1 {
				w.flush(i)
				w.out = append(w.out, "\uFFFD"...)
				w.run, edited = i+1, true
			}
			i += size
		case doc[i+1] == 'u':
			w.flush(i)
			r := getu4(doc[i:])
			i += 6
			if utf16.IsSurrogate(r) {
				// As encoding/json decodes: a pair is one character, a
				// surrogate alone U+FFFD.
				if d := utf16.DecodeRune(r, getu4(doc[i:])); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			w.out = appendRune(w.out, r)
			w.run, edited = i, true
			w.esc = w.esc || r < ' ' || r == '"' || r == '\\'
		case doc[i+1] == '/':
			w.flush(i)
			w.run, edited = i+1, true // the '/'
			i += 2
		default: // \", \\, \b, \f, \n, \r or \t: as canonical form has it
			w.esc = true
			i += 2
		}
	}
}

// plainRun returns the index of the first byte from doc[i] that a string
// in canonical form does not have as it is: not ASCII, '"', '\\' or a
// control character.
func plainRun(doc []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(doc); i += 8 {
		x := binary.LittleEndian.Uint64(doc[i:])
		q, bs := x^('"'*ones), x^('\\'*ones)
		// The high bit of a byte is set where the byte is a control
		// character, '"' or '\\', or not ASCII, and maybe in later
		// bytes, never in earlier ones.
		if m := ((x-' '*ones)&^x | (q-ones)&^q | (bs-ones)&^bs | x) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(doc) && plain[doc[i]] {
		i++
	}
	return i
}

// appendRune appends r as appendString writes it in a string.
func appendRune(dst []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		return appendByte(dst, byte(r))
	}
	return utf8.AppendRune(dst, r)
}

// getu4 returns the character of the escape \uXXXX that s starts with, or
// -1 if s does not start with one.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// number writes the number that starts at doc[i] in canonical form and
// returns the index after it.
func (w *writer) number(i int) int {
	start := i
	plainInt := true
	for ; i < len(w.doc); i++ {
		c := w.doc[i]
		if isDigit(c) {
			continue
		}
		if c != '-' && c != '.' && c != 'e' && c != 'E' && c != '+' {
			break
		}
		plainInt = plainInt && c == '-'
	}
	lit := w.doc[start:i]
	if plainInt && len(lit) <= 21 && string(lit) != "-0" {
		// An integer of up to 21 digits but -0 is in canonical form: JSON
		// writes it without leading zeros.
		return i
	}
	w.flush(start)
	w.out, _ = appendNumber(w.out, lit)
	w.run = i
	return i
}

// stringEnd returns the index after the string that starts at s[i].
func stringEnd(s []byte, i int) int {
	for i++; ; i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}
