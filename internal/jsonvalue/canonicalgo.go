package jsonvalue

import (
	"encoding/base64"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// AppendCanonicalGo appends the canonical JSON encoding of v, as
// encoding/json would encode v, to dst: the same bytes as
// AppendCanonical(dst, FromGo(v, nil)), without building the generic value
// in between. Values with their own encodings (marshalers, struct types
// left to encoding/json) go through FromGo.
func AppendCanonicalGo(dst []byte, v any) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	return appendCanonicalGo(dst, reflect.ValueOf(v), 0)
}

func appendCanonicalGo(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, &UnsupportedError{What: "a value nested too deep (a cycle?)"}
	}
	if v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer && !hasCustomEncoding(v) {
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return appendCanonicalGo(dst, v.Elem(), depth+1)
	}
	if hasCustomEncoding(v) {
		g, err := fromValue(v, nil, depth)
		if err != nil {
			return dst, err
		}
		return appendCanonical(dst, g, depth)
	}
	switch v.Kind() {
	case reflect.Bool:
		return strconv.AppendBool(dst, v.Bool()), nil
	case reflect.String:
		if v.Type() == numberType {
			g, err := numberFromString(v.String())
			if err != nil {
				return dst, err
			}
			return appendCanonical(dst, g, depth)
		}
		return appendString(dst, v.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.AppendUint(dst, v.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		g, err := floatValue(v.Float(), v.Type().Bits())
		if err != nil {
			return dst, err
		}
		return appendCanonical(dst, g, depth)
	case reflect.Slice:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if isByteSlice(v.Type()) {
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
			return append(dst, '"'), nil
		}
		return appendCanonicalGoArray(dst, v, depth)
	case reflect.Array:
		return appendCanonicalGoArray(dst, v, depth)
	case reflect.Map:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return appendCanonicalGoMap(dst, v, depth)
	case reflect.Struct:
		return appendCanonicalGoStruct(dst, v, depth)
	}
	return dst, &UnsupportedError{What: "type " + v.Type().String()}
}

func appendCanonicalGoArray(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	dst = append(dst, '[')
	for i := range v.Len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendCanonicalGo(dst, v.Index(i), depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// mapKeys holds the scratch slices that sort map keys.
var mapKeys = sync.Pool{New: func() any { return new([]mapEntry) }}

type mapEntry struct {
	name  string
	value reflect.Value
}

func appendCanonicalGoMap(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	dst = append(dst, '{')
	err := eachMapMember(v, func(i int, name string, value reflect.Value) error {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, name)
		dst = append(dst, ':')
		var err error
		dst, err = appendCanonicalGo(dst, value, depth+1)
		return err
	})
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// eachMapMember calls member with the members of the map m in the order of
// their names, as encoding/json orders them.
func eachMapMember(m reflect.Value, member func(i int, name string, value reflect.Value) error) error {
	entries := mapKeys.Get().(*[]mapEntry)
	defer func() {
		clear(*entries)
		*entries = (*entries)[:0]
		mapKeys.Put(entries)
	}()
	iter := m.MapRange()
	for iter.Next() {
		name, err := mapKeyName(iter.Key())
		if err != nil {
			return err
		}
		*entries = append(*entries, mapEntry{name: name, value: iter.Value()})
	}
	slices.SortFunc(*entries, func(a, b mapEntry) int { return strings.Compare(a.name, b.name) })
	for i, e := range *entries {
		if err := member(i, e.name, e.value); err != nil {
			return err
		}
	}
	return nil
}

func appendCanonicalGoStruct(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	info := structInfoOf(v.Type())
	dst = append(dst, '{')
	first := true
	for _, i := range info.sorted {
		f := &info.fields[i]
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyValue(fv) || f.omitZero && isZero(fv) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, f.name)
		dst = append(dst, ':')
		var err error
		if dst, err = appendCanonicalGo(dst, fv, depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// NullOrEmpty reports whether a canonical encoding (as AppendCanonical
// writes it, with no spaces) is null, an empty string, or an array or
// object whose elements are all null, including an empty one.
func NullOrEmpty(canonical []byte) bool {
	b := canonical
	// isNullAt reports whether b holds "null" at i, followed by a separator
	// or the closing bracket.
	isNullAt := func(i int, closing byte) bool {
		return len(b) >= i+5 && string(b[i:i+4]) == "null" && (b[i+4] == ',' || b[i+4] == closing)
	}
	switch {
	case string(b) == "null" || string(b) == `""`:
		return true
	case len(b) < 2:
		return false
	case b[0] == '[':
		for i := 1; i < len(b); i += 5 {
			if b[i] == ']' {
				return true
			}
			if !isNullAt(i, ']') {
				return false
			}
			if b[i+4] == ']' {
				return true
			}
		}
	case b[0] == '{':
		d := decoder{data: b, pos: 1}
		for d.pos < len(b) {
			if b[d.pos] == '}' {
				return true
			}
			if _, _, err := d.scanString(); err != nil || d.pos >= len(b) || b[d.pos] != ':' {
				return false
			}
			if !isNullAt(d.pos+1, '}') {
				return false
			}
			if b[d.pos+5] == '}' {
				return true
			}
			d.pos += 6
		}
	}
	return false
}
