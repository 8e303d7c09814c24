package jsonvalue

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"unsafe"
)

// errFallback stops a direct decode and hands the data to encoding/json.
var errFallback = errors.New("jsonvalue: decode with encoding/json")

// unsafeString views b as a string without copying, for parsers that do
// not keep their input (the errors that would keep it are discarded).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

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
