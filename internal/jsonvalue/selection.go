package jsonvalue

import "reflect"

// A Selection is the set of parts of a JSON value that a reader needs: a
// tree of object member names. Arrays are transparent: the selection that
// applies to an array applies to each of its elements. A nil *Selection, or
// one marked with SelectAll, selects the whole value.
type Selection struct {
	all    bool
	fields map[string]*Selection
	// keys holds the member names as reflect values, made once, so that
	// FromGo can look them up in Go maps without allocating.
	keys []reflect.Value
}

// NewSelection returns a selection that selects nothing but the value's kind
// until members are added with Field.
func NewSelection() *Selection { return &Selection{} }

// SelectAll marks s as selecting its whole value.
func (s *Selection) SelectAll() {
	s.all = true
	s.fields = nil
	s.keys = nil
}

// All reports whether s selects the whole value.
func (s *Selection) All() bool { return s == nil || s.all }

// Field returns the selection of member name, adding it if needed. On a
// selection that selects everything, it returns s itself.
func (s *Selection) Field(name string) *Selection {
	if s.All() {
		return s
	}
	if child, ok := s.fields[name]; ok {
		return child
	}
	if s.fields == nil {
		s.fields = make(map[string]*Selection)
	}
	child := &Selection{}
	s.fields[name] = child
	s.keys = append(s.keys, reflect.ValueOf(name))
	return child
}

// lookup returns the selection of member name, and whether it is selected
// at all.
func (s *Selection) lookup(name string) (*Selection, bool) {
	if s.All() {
		return s, true
	}
	child, ok := s.fields[name]
	return child, ok
}

// Merge adds everything other selects to s.
func (s *Selection) Merge(other *Selection) {
	if s.All() {
		return
	}
	if other.All() {
		s.SelectAll()
		return
	}
	for name, child := range other.fields {
		s.Field(name).Merge(child)
	}
}

// String describes the selection, for tests and debugging: "*" for the
// whole value, otherwise the selected members in braces, each followed by
// its own selection unless it is selected whole.
func (s *Selection) String() string {
	if s.All() {
		return "*"
	}
	b := []byte{'{'}
	for i, k := range s.keys {
		if i > 0 {
			b = append(b, ' ')
		}
		name := k.String()
		b = appendString(b, name)
		if child := s.fields[name]; !child.All() {
			b = append(b, ':')
			b = append(b, child.String()...)
		}
	}
	return string(append(b, '}'))
}
