package jsonvalue

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unsafe"
)

// Unmarshal decodes data into v, which must be a non-nil pointer, exactly as
// encoding/json.Unmarshal does, but without its generality where it is not
// needed: plain structs, maps with string keys, slices, arrays, strings,
// bools and numbers are decoded directly, and anything else (unmarshalers,
// interfaces, embedded structs, field names that match only without regard
// to case, values of the wrong type) makes it start again with
// encoding/json, into a fresh zero value. It is meant for decoding what
// json.Marshal wrote for the same type, such as a stored response.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return json.Unmarshal(data, v)
	}
	d := decoder{data: data, batchStrings: true}
	d.skipSpace()
	err := d.into(rv.Elem())
	if err == nil && d.end() != nil {
		err = errFallback
	}
	if err != nil {
		// Start again with encoding/json, which also gives its own errors.
		rv.Elem().SetZero()
		return json.Unmarshal(data, v)
	}
	return nil
}

// errFallback stops a direct decode and hands the data to encoding/json.
var errFallback = errors.New("jsonvalue: decode with encoding/json")

// decodesItself reports whether values of type t decode themselves
// (json.Unmarshaler or encoding.TextUnmarshaler), which encoding/json must
// then do.
func decodesItself(t reflect.Type) bool { return methodsOf(t).ptrUnmarshaler }

// into decodes one value into v, which is addressable.
func (d *decoder) into(v reflect.Value) error {
	if decodesItself(v.Type()) {
		return errFallback
	}
	return d.intoPlain(v)
}

// intoPlain is into for a v whose type does not decode itself.
func (d *decoder) intoPlain(v reflect.Value) error {
	if d.pos >= len(d.data) {
		return errFallback
	}
	t := v.Type()
	c := d.data[d.pos]
	if c == 'n' {
		if _, err := d.literal(); err != nil {
			return err
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			v.SetZero()
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return d.into(v.Elem())
	case reflect.Struct:
		if c != '{' {
			return errFallback
		}
		return d.intoStruct(v)
	case reflect.Map:
		if t == stringMapType && c == '{' {
			return d.intoStringMap(v)
		}
		if c != '{' || t.Key().Kind() != reflect.String || t.Key().Implements(textUnmarshalerType) || reflect.PointerTo(t.Key()).Implements(textUnmarshalerType) {
			return errFallback
		}
		return d.intoMap(v)
	case reflect.Slice:
		if c == '"' && isByteSlice(t) && !reflect.PointerTo(t.Elem()).Implements(unmarshalerType) {
			return d.intoBytes(v)
		}
		if c != '[' {
			return errFallback
		}
		return d.intoSlice(v)
	case reflect.Array:
		if c != '[' {
			return errFallback
		}
		return d.intoArray(v)
	case reflect.String:
		if c != '"' || t == numberType {
			return errFallback
		}
		s, err := d.stringValue()
		if err != nil {
			return err
		}
		v.SetString(s)
		return nil
	case reflect.Bool:
		if c != 't' && c != 'f' {
			return errFallback
		}
		b, err := d.literal()
		if err != nil {
			return err
		}
		v.SetBool(b.(bool))
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lit, err := d.numberLiteral(c)
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(unsafeString(lit), 10, 64)
		if err != nil || v.OverflowInt(n) {
			return errFallback
		}
		v.SetInt(n)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		lit, err := d.numberLiteral(c)
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(unsafeString(lit), 10, 64)
		if err != nil || v.OverflowUint(n) {
			return errFallback
		}
		v.SetUint(n)
		return nil
	case reflect.Float32, reflect.Float64:
		lit, err := d.numberLiteral(c)
		if err != nil {
			return err
		}
		f, err := strconv.ParseFloat(unsafeString(lit), t.Bits())
		if err != nil || v.OverflowFloat(f) {
			return errFallback
		}
		v.SetFloat(f)
		return nil
	}
	// Interfaces, and anything else, as encoding/json decodes them.
	return errFallback
}

// unsafeString views b as a string without copying, for parsers that do
// not keep their input (the errors that would keep it are discarded).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (d *decoder) numberLiteral(c byte) ([]byte, error) {
	if c != '-' && (c < '0' || c > '9') {
		return nil, errFallback
	}
	return d.number()
}

func (d *decoder) intoStruct(v reflect.Value) error {
	info := structInfoOf(v.Type())
	if info.viaEncodingJSON {
		return errFallback
	}
	return d.members(func(name []byte) error {
		i, ok := info.byName[string(name)]
		if !ok {
			if info.matchesFolded(string(name)) {
				return errFallback // encoding/json would match it without regard to case
			}
			return d.skip()
		}
		f := &info.fields[i]
		if f.decodesItself {
			return errFallback
		}
		return d.intoPlain(v.Field(f.index))
	})
}

// matchesFolded reports whether name equals a field name without regard to
// case.
func (info *structInfo) matchesFolded(name string) bool {
	for i := range info.fields {
		if strings.EqualFold(info.fields[i].name, name) {
			return true
		}
	}
	return false
}

func (d *decoder) intoMap(v reflect.Value) error { return d.mapInto(v, d.into) }

// mapInto decodes the object at the current position into the map v,
// whose keys are strings, with elem decoding each member's value into a
// zero element.
func (d *decoder) mapInto(v reflect.Value, elem func(reflect.Value) error) error {
	t := v.Type()
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	// One key and one element, reused: SetMapIndex copies them in.
	key := reflect.New(t.Key()).Elem()
	value := reflect.New(t.Elem()).Elem()
	return d.members(func(name []byte) error {
		value.SetZero()
		if err := elem(value); err != nil {
			return err
		}
		key.SetString(d.makeString(name, false))
		v.SetMapIndex(key, value)
		return nil
	})
}

var stringMapType = reflect.TypeFor[map[string]string]()

// intoStringMap decodes into a map[string]string, the type of HTTP headers,
// without going through reflect for each member.
func (d *decoder) intoStringMap(v reflect.Value) error {
	// Through the address rather than v.Interface(), which would make the
	// value being decoded escape.
	return d.stringMapInto((*map[string]string)(v.Addr().UnsafePointer()))
}

// stringMapInto decodes the object at the current position into *p.
func (d *decoder) stringMapInto(p *map[string]string) error {
	m := *p
	if m == nil {
		m = make(map[string]string)
		*p = m
	}
	return d.members(func(name []byte) error {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return errFallback
		}
		s, err := d.stringValue()
		if err != nil {
			return err
		}
		m[d.makeString(name, false)] = s
		return nil
	})
}

// members walks an object's members, calling member with the decoded name
// of each, positioned at its value.
func (d *decoder) members(member func(name []byte) error) error {
	return d.eachMember(func(raw []byte, escaped bool) error {
		if escaped {
			raw = []byte(unescape(raw))
		}
		return member(raw)
	})
}

func (d *decoder) intoSlice(v reflect.Value) error { return d.sliceInto(v, d.into) }

// sliceInto decodes the array at the current position into the slice v,
// with elem decoding each element into a zero one.
func (d *decoder) sliceInto(v reflect.Value, elem func(reflect.Value) error) error {
	t := v.Type()
	n := 0
	err := d.eachElement(func() error {
		if n >= v.Cap() {
			grown := reflect.MakeSlice(t, n+1, max(4, 2*v.Cap()))
			reflect.Copy(grown, v)
			v.Set(grown)
		}
		v.SetLen(n + 1)
		el := v.Index(n)
		el.SetZero()
		n++
		return elem(el)
	})
	if err != nil {
		return err
	}
	if v.IsNil() {
		v.Set(reflect.MakeSlice(t, 0, 0)) // [] is an empty slice, not nil
	}
	v.SetLen(n)
	return nil
}

func (d *decoder) intoArray(v reflect.Value) error { return d.arrayInto(v, d.into) }

// arrayInto decodes the array at the current position into the array v,
// with elem decoding each element; elements beyond v's length are
// skipped, and those the document lacks are zeroed.
func (d *decoder) arrayInto(v reflect.Value, elem func(reflect.Value) error) error {
	n := 0
	err := d.eachElement(func() error {
		if n >= v.Len() {
			n++
			return d.skip()
		}
		n++
		return elem(v.Index(n - 1))
	})
	for i := n; i < v.Len(); i++ {
		v.Index(i).SetZero()
	}
	return err
}

func (d *decoder) intoBytes(v reflect.Value) error {
	b, err := d.base64String()
	if err != nil {
		return err
	}
	v.SetBytes(b)
	return nil
}

// base64String decodes the string at the current position as encoding/json
// decodes a []byte, from standard base64. Escapes in the string are left
// to encoding/json.
func (d *decoder) base64String() ([]byte, error) {
	raw, escaped, err := d.scanString()
	if err != nil || escaped {
		return nil, errFallback
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(raw)))
	n, err := base64.StdEncoding.Decode(b, raw)
	if err != nil {
		return nil, errFallback
	}
	return b[:n], nil
}
