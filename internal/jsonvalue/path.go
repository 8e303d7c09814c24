package jsonvalue

import (
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A Step is one step of a path into a JSON value: an object member, or an
// array element.
type Step struct {
	Name    string // the member name, when IsIndex is false
	Index   int    // the element index, from the end when negative
	IsIndex bool

	key reflect.Value // Name as a reflect.Value, for Go map lookups
}

// Member returns a step to the object member name.
func Member(name string) Step { return Step{Name: name, key: reflect.ValueOf(name)} }

// Element returns a step to the array element i; a negative i counts from
// the end (-1 is the last element).
func Element(i int) Step { return Step{Index: i, IsIndex: true} }

// PathSelection returns the selection of what a path reads: the members on
// the path, and the whole value at its end.
func PathSelection(path []Step) *Selection {
	root := NewSelection()
	s := root
	for _, step := range path {
		if !step.IsIndex {
			s = s.Field(step.Name)
		}
	}
	s.SelectAll()
	return root
}

// Walk follows path through a generic value. A member of anything but an
// object, a missing member, and an element outside an array are null, as in
// JMESPath.
func Walk(v any, path []Step) any {
	for _, step := range path {
		if step.IsIndex {
			arr, ok := v.([]any)
			if !ok {
				return nil
			}
			i := step.Index
			if i < 0 {
				i += len(arr)
			}
			if i < 0 || i >= len(arr) {
				return nil
			}
			v = arr[i]
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[step.Name]
	}
	return v
}

// LookupJSON returns the value at path in the JSON document data, decoding
// only that value, as Walk(Decode(data, nil), path) would. The whole
// document is still checked for syntax.
func LookupJSON(data []byte, path []Step) (any, error) {
	d := decoder{data: data}
	return d.lookupDocument(path)
}

// LookupJSONString is LookupJSON on a document held in a string. The
// strings it returns may share the document's memory, as substrings do.
func LookupJSONString(doc string, path []Step) (any, error) {
	d := decoder{data: unsafe.Slice(unsafe.StringData(doc), len(doc)), shared: true}
	return d.lookupDocument(path)
}

// AppendCanonicalAt appends the canonical encoding of the value at path in
// doc to dst, as AppendCanonical(dst, LookupJSONString(doc, path)) does. A
// string without escapes, the usual key, is encoded straight from doc,
// without an allocation.
func AppendCanonicalAt(dst []byte, doc string, path []Step) ([]byte, error) {
	d := decoder{data: unsafe.Slice(unsafe.StringData(doc), len(doc)), shared: true, keepPlain: true}
	v, err := d.lookupDocument(path)
	if err != nil {
		return dst, err
	}
	if d.hasPlain {
		return appendString(dst, unsafe.String(unsafe.SliceData(d.plain), len(d.plain))), nil
	}
	return AppendCanonical(dst, v)
}

// lookupDocument looks path up in the whole of d's data.
func (d *decoder) lookupDocument(path []Step) (any, error) {
	d.skipSpace()
	v, err := d.lookup(path)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (d *decoder) lookup(path []Step) (any, error) {
	if len(path) == 0 {
		if d.keepPlain && d.pos < len(d.data) && d.data[d.pos] == '"' {
			raw, escaped, err := d.scanString()
			switch {
			case err != nil:
				return nil, err
			case escaped:
				return unescape(raw), nil
			}
			d.plain, d.hasPlain = raw, true
			return nil, nil
		}
		return d.value(nil)
	}
	if d.pos >= len(d.data) {
		return nil, d.unexpectedEnd()
	}
	switch d.data[d.pos] {
	case '{':
		if !path[0].IsIndex {
			return d.lookupObject(path)
		}
	case '[':
		if path[0].IsIndex {
			return d.lookupArray(path)
		}
	}
	// A step into a value that does not have it: null, once the value has
	// been checked.
	return nil, d.skip()
}

func (d *decoder) lookupObject(path []Step) (any, error) {
	end, member, ok := scanValue(d.data, d.pos, d.depth, true, path[0].Name)
	if !ok {
		// The object is malformed (or deeply nested): the step-by-step
		// walk finds the error.
		return d.lookupObjectChecked(path)
	}
	if member < 0 {
		d.pos = end
		return nil, nil
	}
	// The object is checked, and its last member of that name (the one
	// encoding/json keeps) found: look the rest of the path up in it.
	d.pos = member
	d.depth++
	found, err := d.lookup(path[1:])
	d.depth--
	d.pos = end
	return found, err
}

// lookupObjectChecked is lookupObject member by member, reporting the
// first error.
func (d *decoder) lookupObjectChecked(path []Step) (any, error) {
	var found any
	err := d.eachMember(func(raw []byte, escaped bool) error {
		match := string(raw) == path[0].Name
		if escaped {
			match = unescape(raw) == path[0].Name
		}
		if !match {
			return d.skip()
		}
		// A later duplicate member wins, as in encoding/json.
		var err error
		d.hasPlain = false
		found, err = d.lookup(path[1:])
		return err
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

func (d *decoder) lookupArray(path []Step) (any, error) {
	want := path[0].Index
	if want < 0 {
		start := d.pos
		n := 0
		if err := d.eachElement(func() error { n++; return d.skip() }); err != nil {
			return nil, err
		}
		if want += n; want < 0 {
			return nil, nil // checked already, and out of range
		}
		d.pos = start
	}
	var found any
	i := 0
	err := d.eachElement(func() error {
		defer func() { i++ }()
		if i != want {
			return d.skip()
		}
		var err error
		found, err = d.lookup(path[1:])
		return err
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// LookupGo returns the value at path in v, as encoding/json would encode v,
// converting only that value: the same as Walk(FromGo(v, nil), path) for
// the parts of v on the path.
func LookupGo(v any, path []Step) (any, error) {
	rv, generic, converted, err := lookupGo(v, path)
	if converted || err != nil {
		return generic, err
	}
	return fromValue(rv, nil, 0)
}

// LookupGoString is LookupGo for a value that is usually a string: when it
// is one, it returns it as s with isString set, without the allocation of
// putting it in an interface; otherwise it returns the value as other.
func LookupGoString(v any, path []Step) (s string, isString bool, other any, err error) {
	rv, generic, converted, err := lookupGo(v, path)
	if converted || err != nil {
		s, isString = generic.(string)
		return s, isString, generic, err
	}
	if rv = indirect(rv); rv.IsValid() && rv.Kind() == reflect.String && rv.Type() != numberType && !hasCustomEncoding(rv) {
		return rv.String(), true, nil, nil
	}
	other, err = fromValue(rv, nil, 0)
	return "", false, other, err
}

// A GoPath is a path compiled, for each Go type it meets, into direct
// reads of the string at its end: the body of powertools_json(body) in the
// usual key expression. On a pointer to a struct whose fields on the path
// are plain (no marshalers, embedded fields, interfaces, maps or omitzero),
// LookupString is a type check and a few loads instead of a reflection
// walk; everything else takes LookupGoString. It is safe for concurrent use.
type GoPath struct {
	path []Step
	// last is the accessor of the type seen last, the only one a handler
	// with one event type needs; byType keeps the others.
	last   atomic.Pointer[goAccess]
	byType sync.Map // reflect.Type -> *goAccess
}

// NewGoPath compiles path for LookupString.
func NewGoPath(path []Step) *GoPath { return &GoPath{path: path} }

// LookupString is LookupGoString(v, path).
func (p *GoPath) LookupString(v any) (s string, isString bool, other any, err error) {
	iface := (*eface)(unsafe.Pointer(&v))
	a := p.last.Load()
	if a == nil || a.typ != iface.typ {
		a = p.access(v)
	}
	if a.direct {
		if s, ok := a.read(iface.data); ok {
			return s, true, nil, nil
		}
	}
	return LookupGoString(v, p.path)
}

// eface is the layout of an any: its type word and its data word, which
// is the value itself when the value is a pointer.
type eface struct {
	typ, data unsafe.Pointer
}

// access returns the accessor of v's type, compiling it on first use.
func (p *GoPath) access(v any) *goAccess {
	t := reflect.TypeOf(v)
	if t == nil {
		p.last.Store(nilAccess)
		return nilAccess
	}
	cached, ok := p.byType.Load(t)
	if !ok {
		a := compileGoAccess(t, p.path)
		a.typ = (*eface)(unsafe.Pointer(&v)).typ
		cached, _ = p.byType.LoadOrStore(t, a)
	}
	a := cached.(*goAccess)
	p.last.Store(a)
	return a
}

// nilAccess is the accessor of a nil any.
var nilAccess = &goAccess{}

// A goAccess reads the string at the end of a path from a pointer of one
// type: starting from the pointer, each op adds a field offset or follows
// a pointer field.
type goAccess struct {
	typ    unsafe.Pointer // the type word of the values it reads
	direct bool           // false: the type takes the reflection walk
	ops    []goOp
	// omitEmpty: the string is a field with omitempty, which makes an
	// empty one null.
	omitEmpty bool
}

type goOp struct {
	offset uintptr
	deref  bool // follow the pointer at the address rather than add offset
}

// read returns the string at the end of the path from the pointer p, or
// false when the path meets a nil pointer or an omitted string: the cases
// that LookupGoString turns into null.
func (a *goAccess) read(p unsafe.Pointer) (string, bool) {
	if p == nil {
		return "", false
	}
	for _, op := range a.ops {
		if !op.deref {
			p = unsafe.Add(p, op.offset)
			continue
		}
		if p = *(*unsafe.Pointer)(p); p == nil {
			return "", false
		}
	}
	s := *(*string)(p)
	if s == "" && a.omitEmpty {
		return "", false
	}
	return s, true
}

// compileGoAccess returns the accessor of path in values of type t. It is
// not direct unless every value on the path is a plain struct field or
// pointer, and the path ends at a plain string: LookupGoString gives
// everything else its meaning.
func compileGoAccess(t reflect.Type, path []Step) *goAccess {
	a := &goAccess{}
	// Only a pointer is its own data word; another value's data word
	// points at a copy, or is the value itself when pointer-shaped, which
	// reflect does not say.
	if t.Kind() != reflect.Pointer || !plainType(t) {
		return a
	}
	t = t.Elem()
	deref := func() bool {
		for t.Kind() == reflect.Pointer {
			if !plainType(t) {
				return false
			}
			a.ops = append(a.ops, goOp{deref: true})
			a.omitEmpty = false
			t = t.Elem()
		}
		return plainType(t)
	}
	for _, step := range path {
		if !deref() || step.IsIndex || t.Kind() != reflect.Struct {
			return a
		}
		info := structInfoOf(t)
		if info.viaEncodingJSON {
			return a
		}
		i, ok := info.byName[step.Name]
		if !ok || info.fields[i].omitZero {
			return a
		}
		f := t.Field(info.fields[i].index)
		if n := len(a.ops); n > 0 && !a.ops[n-1].deref {
			a.ops[n-1].offset += f.Offset
		} else {
			a.ops = append(a.ops, goOp{offset: f.Offset})
		}
		// omitempty matters only for the string itself: a struct is never
		// empty, and a nil pointer takes the reflection walk.
		a.omitEmpty = info.fields[i].omitEmpty
		t = f.Type
	}
	if !deref() || t.Kind() != reflect.String || t == numberType {
		return a
	}
	a.direct = true
	return a
}

// plainType reports whether encoding/json encodes t's values without any
// method of theirs, whether addressable or not.
func plainType(t reflect.Type) bool {
	m := methodsOf(t)
	return !m.marshaler && !m.textMarshaler && !m.ptrMarshaler && !m.ptrTextMarshaler
}

// lookupGo follows path through v. It returns the Go value at the end of
// the path, or, when part of the path had to be converted first (custom
// encodings) or leads nowhere, the generic value with converted set.
func lookupGo(v any, path []Step) (rv reflect.Value, generic any, converted bool, err error) {
	if v == nil {
		return reflect.Value{}, nil, true, nil
	}
	rv = reflect.ValueOf(v)
	for i, step := range path {
		rv = indirect(rv)
		if !rv.IsValid() {
			return rv, nil, true, nil
		}
		if hasCustomEncoding(rv) {
			// Marshalers and struct types left to encoding/json: convert the
			// rest of the path's value, then walk it.
			g, err := fromValue(rv, PathSelection(path[i:]), 0)
			if err != nil {
				return rv, nil, true, err
			}
			return rv, Walk(g, path[i:]), true, nil
		}
		next, ok := goStep(rv, step)
		if !ok {
			return rv, nil, true, nil
		}
		rv = next
	}
	return rv, nil, false, nil
}

// indirect follows pointers and interfaces that encoding/json would follow,
// and returns the zero Value for a nil one. It stops at a pointer whose
// type has a custom encoding, which hasCustomEncoding then reports.
func indirect(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		if v.Kind() == reflect.Pointer && methodsOf(v.Type()).encodesItself() {
			return v
		}
		v = v.Elem()
	}
	return v
}

// hasCustomEncoding reports whether fromValue would encode v through a
// marshaler or through encoding/json rather than member by member.
func hasCustomEncoding(v reflect.Value) bool {
	t := v.Type()
	if m := methodsOf(t); m.encodesItself() || (m.ptrMarshaler || m.ptrTextMarshaler) && v.CanAddr() {
		return true
	}
	if t.Kind() == reflect.Struct {
		return structInfoOf(t).viaEncodingJSON
	}
	if t.Kind() == reflect.Map {
		// Object keys other than strings need converting.
		return t.Key().Kind() != reflect.String
	}
	return false
}

// goStep takes one step into v, which has no custom encoding. It reports
// false when the step leads nowhere (a null result).
func goStep(v reflect.Value, step Step) (reflect.Value, bool) {
	if step.IsIndex {
		switch v.Kind() {
		case reflect.Slice:
			if v.IsNil() || isByteSlice(v.Type()) {
				return reflect.Value{}, false
			}
		case reflect.Array:
		default:
			return reflect.Value{}, false
		}
		i := step.Index
		if i < 0 {
			i += v.Len()
		}
		if i < 0 || i >= v.Len() {
			return reflect.Value{}, false
		}
		return v.Index(i), true
	}
	switch v.Kind() {
	case reflect.Struct:
		info := structInfoOf(v.Type())
		i, ok := info.byName[step.Name]
		if !ok {
			return reflect.Value{}, false
		}
		f := &info.fields[i]
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyValue(fv) || f.omitZero && isZero(fv) {
			return reflect.Value{}, false
		}
		return fv, true
	case reflect.Map:
		if v.IsNil() {
			return reflect.Value{}, false
		}
		key := step.key
		if !key.IsValid() {
			key = reflect.ValueOf(step.Name)
		}
		if kt := v.Type().Key(); kt != key.Type() {
			key = key.Convert(kt)
		}
		mv := v.MapIndex(key)
		return mv, mv.IsValid()
	}
	return reflect.Value{}, false
}
