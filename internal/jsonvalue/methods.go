package jsonvalue

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
)

var (
	marshalerType       = reflect.TypeFor[json.Marshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// typeMethods says which of the methods encoding/json looks for a type has.
type typeMethods struct {
	marshaler, textMarshaler bool // the type implements json.Marshaler, encoding.TextMarshaler
	// A pointer to the type does; false when the type is a pointer itself,
	// whose pointer encoding/json never considers.
	ptrMarshaler, ptrTextMarshaler bool
	// A pointer to the type implements json.Unmarshaler or
	// encoding.TextUnmarshaler.
	ptrUnmarshaler bool
}

// encodesItself reports whether the type's values encode themselves.
func (m typeMethods) encodesItself() bool { return m.marshaler || m.textMarshaler }

var methodCache sync.Map // reflect.Type -> typeMethods

// methodsOf returns t's typeMethods, from a cache: the encoders, decoders
// and lookups ask for them at every value, and Implements scans method
// sets.
func methodsOf(t reflect.Type) typeMethods {
	if m, ok := methodCache.Load(t); ok {
		return m.(typeMethods)
	}
	p := reflect.PointerTo(t)
	m := typeMethods{
		marshaler:      t.Implements(marshalerType),
		textMarshaler:  t.Implements(textMarshalerType),
		ptrUnmarshaler: p.Implements(unmarshalerType) || p.Implements(textUnmarshalerType),
	}
	if t.Kind() != reflect.Pointer {
		m.ptrMarshaler = p.Implements(marshalerType)
		m.ptrTextMarshaler = p.Implements(textMarshalerType)
	}
	methodCache.Store(t, m)
	return m
}
