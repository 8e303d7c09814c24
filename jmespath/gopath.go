package jmespath

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// followGo follows path on v as on the JSON that json.Marshal makes of v,
// with encoding/json's rules (encode.go): a struct's members are its
// exported fields, named by their json tags, without those tagged "-" or
// tagged omitempty and empty; a map's are its entries; a slice or array is
// an array ([]byte aside); a nil pointer, interface, map or slice is null.
// It returns the value the path reaches, invalid for null, or ok=false
// where the rules are not simple: a value on the path (not at its end)
// whose type or pointer type has a MarshalJSON or MarshalText method, a
// struct with embedded fields, a field with the string or omitzero option
// or a name that two fields share, a map whose keys are not strings, a
// []byte, or a struct that json.Marshal always refuses. The caller then
// encodes v whole.
func followGo(v reflect.Value, path []step) (leaf reflect.Value, ok bool) {
	for _, s := range path {
		if v, ok = deref(v); !ok || !v.IsValid() {
			return v, ok
		}
		t := goTypeOf(v.Type())
		if t.opaque {
			return v, false
		}
		if v, ok = t.step(v, s); !ok {
			return v, false
		}
	}
	return v, true
}

// deref follows v's pointers and interfaces: it returns the value they
// point to (invalid for a nil one), or v and false at one whose type has a
// marshaling method.
func deref(v reflect.Value) (reflect.Value, bool) {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if goTypeOf(v.Type()).marshals {
			return v, false
		}
		if v.IsNil() {
			return reflect.Value{}, true
		}
		v = v.Elem()
	}
	return v, true
}

func (t *goType) step(v reflect.Value, s step) (reflect.Value, bool) {
	switch v.Kind() {
	case reflect.Struct:
		f, found := t.fields[s.name]
		if s.isIndex || !found {
			return reflect.Value{}, true
		}
		if f.opaque {
			return v, false
		}
		if v = v.Field(f.index); f.omitEmpty && isEmptyValue(v) {
			return reflect.Value{}, true
		}
		return v, true
	case reflect.Map:
		if s.isIndex || v.IsNil() {
			return reflect.Value{}, true
		}
		if !s.plain {
			// encoding/json replaces invalid UTF-8 in keys with U+FFFD: a
			// name with invalid UTF-8 is no member's, and one with U+FFFD
			// may be the name of several keys.
			return reflect.Value{}, !utf8.ValidString(s.name)
		}
		key := s.key
		if kt := v.Type().Key(); kt != key.Type() {
			key = key.Convert(kt)
		}
		return v.MapIndex(key), true
	case reflect.Slice, reflect.Array:
		i := s.index
		if i < 0 {
			i += v.Len()
		}
		if !s.isIndex || i < 0 || i >= v.Len() {
			return reflect.Value{}, true
		}
		return v.Index(i), true
	}
	return reflect.Value{}, true
}

// isEmptyValue is encoding/json's test for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// goString returns the string that v, reached by a path, is in the JSON
// encoding of the input, with invalid UTF-8 replaced as json.Marshal
// replaces it; ok is false if v is not one that json.Marshal writes as it
// is.
func goString(v reflect.Value) (s string, ok bool) {
	v, _ = deref(v)
	if !v.IsValid() || v.Kind() != reflect.String || v.Type() == numberType || goTypeOf(v.Type()).marshals {
		return "", false
	}
	if s = v.String(); !utf8.ValidString(s) {
		// strings.Map gives each byte that does not start a valid
		// character U+FFFD, as json.Marshal does.
		s = strings.Map(func(r rune) rune { return r }, s)
	}
	return s, true
}

// goLeaf returns the value that v, reached by a path and not a string for
// goString, has in the JSON encoding of the input, decoded as parseJSON
// decodes. It encodes v with json.Marshal, given a pointer to v when v is
// addressable, so that methods with pointer receivers are called or not as
// json.Marshal calls them on v where it lies.
func goLeaf(v reflect.Value) (any, error) {
	if v, _ = deref(v); !v.IsValid() {
		return nil, nil
	}
	if v.CanAddr() {
		v = v.Addr()
	}
	doc, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, err
	}
	return parseJSON(doc)
}

// goType is what followGo needs to know of a type, worked out once.
type goType struct {
	// marshals: the type or a pointer to it has a MarshalJSON or
	// MarshalText method.
	marshals bool
	// opaque: followGo does not step into values of the type.
	opaque bool
	// fails: json.Marshal refuses every value of the type.
	fails  bool
	fields map[string]goField // a struct's, by JSON name
}

type goField struct {
	index     int
	omitEmpty bool
	opaque    bool // the string or omitzero option, or a name two fields share
}

var (
	goTypes           sync.Map // reflect.Type to *goType
	numberType        = reflect.TypeFor[json.Number]()
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func goTypeOf(rt reflect.Type) *goType {
	if t, ok := goTypes.Load(rt); ok {
		return t.(*goType)
	}
	t, _ := goTypes.LoadOrStore(rt, newGoType(rt))
	return t.(*goType)
}

func newGoType(rt reflect.Type) *goType {
	marshals := func(rt reflect.Type) bool {
		return rt.Implements(marshalerType) || rt.Implements(textMarshalerType)
	}
	t := &goType{marshals: marshals(rt) || rt.Kind() != reflect.Pointer && marshals(reflect.PointerTo(rt))}
	if t.marshals {
		t.opaque = true
		return t
	}
	switch rt.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		t.fails = true
	case reflect.Map:
		// encoding/json encodes keys of other kinds too, with other rules.
		t.opaque = rt.Key().Kind() != reflect.String
		switch rt.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			t.fails = !rt.Key().Implements(textMarshalerType)
		}
	case reflect.Slice:
		t.opaque = rt.Elem().Kind() == reflect.Uint8 // base64, or an array
	case reflect.Array:
		t.fails = rt.Len() > 0 && goTypeOf(rt.Elem()).fails
	case reflect.Struct:
		t.fields = make(map[string]goField)
		for i := range rt.NumField() {
			sf := rt.Field(i)
			tag := sf.Tag.Get("json")
			if sf.Anonymous {
				t.opaque = true
			}
			if !sf.IsExported() || tag == "-" {
				continue
			}
			t.fails = t.fails || goTypeOf(sf.Type).fails
			name, options, _ := strings.Cut(tag, ",")
			if !validTag(name) {
				name = sf.Name
			}
			opts := strings.Split(options, ",")
			f := goField{index: i, omitEmpty: slices.Contains(opts, "omitempty"),
				opaque: slices.Contains(opts, "string") || slices.Contains(opts, "omitzero")}
			if _, dup := t.fields[name]; dup {
				f.opaque = true
			}
			t.fields[name] = f
		}
		t.opaque = t.opaque || t.fails
	}
	return t
}

// validTag is encoding/json's isValidTag: whether name can name a member.
func validTag(name string) bool {
	for _, c := range name {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return name != ""
}
