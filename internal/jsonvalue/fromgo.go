package jsonvalue

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// FromGo converts v into a generic value equal to what Decode would return
// for json.Marshal(v), keeping only the parts sel selects (nil selects
// everything), without encoding v first.
//
// It follows encoding/json's rules: struct field names and options from
// `json` tags (omitempty, omitzero), json.Marshaler and
// encoding.TextMarshaler implementations, []byte as base64, nil slices and
// maps as null. Struct types it does not handle itself (embedded fields,
// the ",string" option, clashing names) are encoded with encoding/json and
// decoded, which gives the same result more slowly.
func FromGo(v any, sel *Selection) (any, error) {
	if v == nil {
		return nil, nil
	}
	return fromValue(reflect.ValueOf(v), sel, 0)
}

var numberType = reflect.TypeFor[json.Number]()

// UnsupportedError reports a Go value that has no JSON encoding.
type UnsupportedError struct{ What string }

// Error implements error.
func (e *UnsupportedError) Error() string { return "jsonvalue: cannot encode " + e.What + " as JSON" }

func fromValue(v reflect.Value, sel *Selection, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, &UnsupportedError{What: fmt.Sprintf("a value nested deeper than %d (a cycle?)", MaxDepth)}
	}
	if !v.IsValid() {
		return nil, nil
	}
	t := v.Type()

	// Marshalers first, in encoding/json's order: a pointer method is used
	// only when the value is addressable.
	m := methodsOf(t)
	if v.CanAddr() {
		if m.ptrMarshaler {
			return fromMarshaler(v.Addr(), sel)
		}
		if !m.marshaler && m.ptrTextMarshaler && !m.textMarshaler {
			return fromTextMarshaler(v.Addr())
		}
	}
	if m.marshaler {
		return fromMarshaler(v, sel)
	}
	if m.textMarshaler {
		return fromTextMarshaler(v)
	}

	switch t.Kind() {
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.String:
		if t == numberType {
			return numberFromString(v.String())
		}
		return v.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intValue(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintValue(v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return floatValue(v.Float(), t.Bits())
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		return fromValue(v.Elem(), sel, depth+1)
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		if isByteSlice(t) {
			return base64.StdEncoding.EncodeToString(v.Bytes()), nil
		}
		return fromArray(v, sel, depth)
	case reflect.Array:
		return fromArray(v, sel, depth)
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		return fromMap(v, sel, depth)
	case reflect.Struct:
		return fromStruct(v, sel, depth)
	default:
		return nil, &UnsupportedError{What: "type " + t.String()}
	}
}

// isByteSlice reports whether encoding/json encodes t as base64: a slice of
// a byte kind whose element type has no marshaler of its own.
func isByteSlice(t reflect.Type) bool {
	e := t.Elem()
	if e.Kind() != reflect.Uint8 {
		return false
	}
	m := methodsOf(e)
	return !m.ptrMarshaler && !m.ptrTextMarshaler
}

func fromMarshaler(v reflect.Value, sel *Selection) (any, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, nil
	}
	b, err := v.Interface().(json.Marshaler).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("jsonvalue: MarshalJSON of %s: %w", v.Type(), err)
	}
	return Decode(b, sel)
}

func fromTextMarshaler(v reflect.Value) (any, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, nil
	}
	b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return nil, fmt.Errorf("jsonvalue: MarshalText of %s: %w", v.Type(), err)
	}
	return string(b), nil
}

// maxExact is the largest magnitude up to which every integer is exact in
// a float64.
const maxExact = 1 << 53

// intValue and uintValue give integers the type Decode gives their text.
func intValue(n int64) any {
	if n >= -maxExact && n <= maxExact {
		return float64(n)
	}
	return numberValue(strconv.AppendInt(nil, n, 10))
}

func uintValue(n uint64) any {
	if n <= maxExact {
		return float64(n)
	}
	return numberValue(strconv.AppendUint(nil, n, 10))
}

func floatValue(f float64, bits int) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &UnsupportedError{What: "the number " + strconv.FormatFloat(f, 'g', -1, 64)}
	}
	if bits == 32 {
		// encoding/json writes a float32 in its shortest 32-bit form: give
		// it the value Decode gives that text.
		return numberValue(strconv.AppendFloat(nil, f, 'g', -1, 32)), nil
	}
	return f, nil
}

// numberFromString converts the text of a json.Number as Decode would.
func numberFromString(s string) (any, error) {
	if s == "" {
		// encoding/json writes an empty json.Number as 0.
		return float64(0), nil
	}
	if _, ok := appendNumber(nil, []byte(s)); !ok || s[0] == '+' {
		return nil, &UnsupportedError{What: fmt.Sprintf("json.Number %q", s)}
	}
	return numberValue([]byte(s)), nil
}

func fromArray(v reflect.Value, sel *Selection, depth int) (any, error) {
	arr := make([]any, v.Len())
	for i := range arr {
		e, err := fromValue(v.Index(i), sel, depth+1)
		if err != nil {
			return nil, err
		}
		arr[i] = e
	}
	return arr, nil
}

func fromMap(v reflect.Value, sel *Selection, depth int) (any, error) {
	t := v.Type()
	kt := t.Key()
	if !sel.All() && kt.Kind() == reflect.String {
		// Look the selected members up instead of walking the whole map.
		obj := make(map[string]any, len(sel.keys))
		for _, k := range sel.keys {
			if kt != k.Type() {
				k = k.Convert(kt)
			}
			mv := v.MapIndex(k)
			if !mv.IsValid() {
				continue
			}
			name := k.String()
			e, err := fromValue(mv, sel.fields[name], depth+1)
			if err != nil {
				return nil, err
			}
			obj[name] = e
		}
		return obj, nil
	}
	obj := make(map[string]any, v.Len())
	iter := v.MapRange()
	for iter.Next() {
		name, err := mapKeyName(iter.Key())
		if err != nil {
			return nil, err
		}
		child, ok := sel.lookup(name)
		if !ok {
			continue
		}
		e, err := fromValue(iter.Value(), child, depth+1)
		if err != nil {
			return nil, err
		}
		obj[name] = e
	}
	return obj, nil
}

// mapKeyName returns the object key encoding/json writes for map key k.
func mapKeyName(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textMarshalerType) {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", nil
		}
		b, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return "", fmt.Errorf("jsonvalue: MarshalText of map key %s: %w", k.Type(), err)
		}
		return string(b), nil
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", &UnsupportedError{What: "map key type " + k.Type().String()}
}

func fromStruct(v reflect.Value, sel *Selection, depth int) (any, error) {
	info := structInfoOf(v.Type())
	if info.viaEncodingJSON {
		var b []byte
		var err error
		if v.CanAddr() {
			b, err = json.Marshal(v.Addr().Interface())
		} else {
			b, err = json.Marshal(v.Interface())
		}
		if err != nil {
			return nil, fmt.Errorf("jsonvalue: %w", err)
		}
		return Decode(b, sel)
	}
	if sel.All() {
		obj := make(map[string]any, len(info.fields))
		for i := range info.fields {
			if err := info.fields[i].add(obj, v, sel, depth); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
	obj := make(map[string]any, len(sel.fields))
	for name, child := range sel.fields {
		i, ok := info.byName[name]
		if !ok {
			continue
		}
		if err := info.fields[i].add(obj, v, child, depth); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

type structInfo struct {
	fields []fieldInfo
	byName map[string]int
	sorted []int // indexes of fields in the order of their names
	// viaEncodingJSON is set for struct types whose field rules FromGo
	// leaves to encoding/json.
	viaEncodingJSON bool
}

type fieldInfo struct {
	name      string
	index     int
	omitEmpty bool
	omitZero  bool
}

func (f *fieldInfo) add(obj map[string]any, v reflect.Value, sel *Selection, depth int) error {
	fv := v.Field(f.index)
	if f.omitEmpty && isEmptyValue(fv) || f.omitZero && isZero(fv) {
		return nil
	}
	e, err := fromValue(fv, sel, depth+1)
	if err != nil {
		return err
	}
	obj[f.name] = e
	return nil
}

var structInfos sync.Map // reflect.Type -> *structInfo

func structInfoOf(t reflect.Type) *structInfo {
	if info, ok := structInfos.Load(t); ok {
		return info.(*structInfo)
	}
	info, _ := structInfos.LoadOrStore(t, newStructInfo(t))
	return info.(*structInfo)
}

func newStructInfo(t reflect.Type) *structInfo {
	info := &structInfo{byName: make(map[string]int)}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			// Promoted fields follow rules FromGo does not copy.
			return &structInfo{viaEncodingJSON: true}
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !validTagName(name) {
			name = f.Name
		}
		field := fieldInfo{name: name, index: i}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "omitempty":
				field.omitEmpty = true
			case "omitzero":
				field.omitZero = true
			case "string":
				return &structInfo{viaEncodingJSON: true}
			}
		}
		if _, dup := info.byName[name]; dup {
			return &structInfo{viaEncodingJSON: true}
		}
		info.byName[name] = len(info.fields)
		info.fields = append(info.fields, field)
	}
	info.sorted = make([]int, len(info.fields))
	for i := range info.sorted {
		info.sorted[i] = i
	}
	slices.SortFunc(info.sorted, func(a, b int) int { return strings.Compare(info.fields[a].name, info.fields[b].name) })
	return info
}

// validTagName follows encoding/json's rule for names in struct tags.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
			// Punctuation other than quotes and backslash is allowed.
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

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

type isZeroer interface{ IsZero() bool }

var isZeroerType = reflect.TypeFor[isZeroer]()

// isZero follows encoding/json's omitzero: an IsZero method when the type
// has one, else the zero value.
func isZero(v reflect.Value) bool {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() || v.Interface().(isZeroer).IsZero()
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return v.IsNil() || v.Interface().(isZeroer).IsZero()
	case t.Implements(isZeroerType):
		return v.Interface().(isZeroer).IsZero()
	case reflect.PointerTo(t).Implements(isZeroerType):
		if !v.CanAddr() {
			boxed := reflect.New(t).Elem()
			boxed.Set(v)
			v = boxed
		}
		return v.Addr().Interface().(isZeroer).IsZero()
	}
	return v.IsZero()
}
