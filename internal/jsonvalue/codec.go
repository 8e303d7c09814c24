package jsonvalue

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"unsafe"
)

// Codec encodes and decodes values of type T as encoding/json does, with
// functions compiled once for T rather than a walk through reflect at every
// value: the way to store and replay a handler's result on every call.
//
// It compiles plain types: structs (without embedded fields, duplicate names
// or the string option), maps with string keys, slices, arrays, pointers,
// strings, bools, numbers and interfaces. When T, or any type it contains,
// has a marshaler or an unmarshaler (json or text), is json.Number, or is
// anything else encoding/json treats specially, the Codec gives every value
// to encoding/json. Either way the
// results are encoding/json's: Marshal returns the bytes json.Marshal
// returns, errors included, and Unmarshal decodes what json.Unmarshal
// decodes into a zero T.
type Codec[T any] struct{ c *codec }

// CodecFor returns the Codec of T. It compiles T, so callers keep the
// Codec rather than ask for it per value.
func CodecFor[T any]() *Codec[T] {
	return &Codec[T]{c: compileType(reflect.TypeFor[T](), false)}
}

// Compiled reports whether T has compiled functions; when it does not,
// every value goes through encoding/json.
func (c *Codec[T]) Compiled() bool { return c.c != nil }

// encodeBuffers holds scratch space for Marshal, which returns a copy.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxKeptBuffer is the largest scratch buffer Marshal puts back in the
// pool, so that one large response does not stay in memory.
const maxKeptBuffer = 64 << 10

// Marshal returns the encoding of *v, the bytes json.Marshal(*v) returns.
func (c *Codec[T]) Marshal(v *T) ([]byte, error) {
	if c.c != nil {
		buf := encodeBuffers.Get().(*[]byte)
		out, err := c.c.enc((*buf)[:0], unsafe.Pointer(v), 0)
		var res []byte
		if err == nil {
			res = slices.Clone(out)
		}
		if cap(out) <= maxKeptBuffer {
			*buf = out[:0]
			encodeBuffers.Put(buf)
		}
		if err == nil {
			return res, nil
		}
		// A value the compiled functions leave to encoding/json (NaN,
		// nesting deep enough to be a cycle): encoding/json says what it
		// makes of it.
	}
	return json.Marshal(*v)
}

// Unmarshal decodes data into *v, which should be the zero T, as
// json.Unmarshal does. On any error or unusual input it zeroes *v and
// starts again with encoding/json, which also gives its own errors.
func (c *Codec[T]) Unmarshal(data []byte, v *T) error {
	if c.c == nil {
		return json.Unmarshal(data, v)
	}
	d := decoders.Get().(*decoder)
	*d = decoder{data: data, batchStrings: true}
	d.skipSpace()
	err := c.c.dec(d, unsafe.Pointer(v))
	if err == nil {
		err = d.end()
	}
	// Let go of the document and of the strings' buffer, which the
	// decoded strings keep.
	*d = decoder{}
	decoders.Put(d)
	if err == nil {
		return nil
	}
	var zero T
	*v = zero
	return json.Unmarshal(data, v)
}

// CanonicalEncoder writes values of type T as AppendCanonicalGo does, with
// functions compiled once for T, as Codec compiles them: the encoding an
// idempotency key is hashed from when it is the whole input. Types that
// do not compile, and values the compiled functions hand over (NaN, deep
// nesting), take AppendCanonicalGo itself.
type CanonicalEncoder[T any] struct{ c *codec }

// CanonicalEncoderFor returns the CanonicalEncoder of T. It compiles T, so
// callers keep it rather than ask for it per value.
func CanonicalEncoderFor[T any]() *CanonicalEncoder[T] {
	return &CanonicalEncoder[T]{c: compileType(reflect.TypeFor[T](), true)}
}

// Compiled reports whether T has compiled functions.
func (e *CanonicalEncoder[T]) Compiled() bool { return e.c != nil }

// Append appends the canonical encoding of *v to dst: the bytes of
// AppendCanonicalGo(dst, v).
func (e *CanonicalEncoder[T]) Append(dst []byte, v *T) ([]byte, error) {
	if e.c != nil {
		out, err := e.c.enc(dst, unsafe.Pointer(v), 0)
		if err == nil {
			return out, nil
		}
		dst = out[:len(dst)]
	}
	return AppendCanonicalGo(dst, v)
}

// decoders holds decoders for Unmarshal: the compiled functions are
// called through function values, which would make a fresh one escape.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

// codec holds the compiled functions of one type. Both take a pointer to a
// value of the type. An error from either means "leave this to
// encoding/json": the callers start again there.
type codec struct {
	enc func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error)
	dec func(d *decoder, p unsafe.Pointer) error
}

// maxEncodeDepth is how many pointers, maps and slices deep the compiled
// encoder goes before it hands the value to encoding/json, which checks
// for cycles from the same depth.
const maxEncodeDepth = 1000

type codecBuilder struct {
	// seen holds the codec of every type compiled so far, including those
	// still being compiled, so that recursive types refer to themselves.
	seen   map[reflect.Type]*codec
	failed bool
	// canonical compiles encoders of AppendCanonicalGo's form rather than
	// encoding/json's: members sorted by name, its own string escapes and
	// number form.
	canonical bool
}

// quoter returns the function that writes strings in the form being
// compiled.
func (b *codecBuilder) quoter() func(dst []byte, s string) []byte {
	if b.canonical {
		return appendString
	}
	return appendStringHTML
}

// compiles reports whether encoding/json encodes and decodes values of t
// by its plain rules, which the compiled functions follow.
func compiles(t reflect.Type) bool {
	return plainType(t) && !methodsOf(t).ptrUnmarshaler && t != numberType
}

// compileType returns the compiled functions of t, in the canonical form
// or encoding/json's, or nil when t does not compile.
func compileType(t reflect.Type, canonical bool) *codec {
	b := codecBuilder{seen: map[reflect.Type]*codec{}, canonical: canonical}
	if c := b.compile(t); !b.failed {
		return c
	}
	return nil
}

func (b *codecBuilder) compile(t reflect.Type) *codec {
	if c, ok := b.seen[t]; ok {
		return c
	}
	if !compiles(t) {
		b.failed = true
		return nil
	}
	c := &codec{}
	b.seen[t] = c
	switch t.Kind() {
	case reflect.Bool:
		c.enc, c.dec = encodeBool, decodeBool
	case reflect.String:
		c.enc, c.dec = encodeString, decodeString
		if b.canonical {
			c.enc = encodeCanonicalString
		}
	case reflect.Int:
		*c = intCodec[int]()
	case reflect.Int8:
		*c = intCodec[int8]()
	case reflect.Int16:
		*c = intCodec[int16]()
	case reflect.Int32:
		*c = intCodec[int32]()
	case reflect.Int64:
		*c = intCodec[int64]()
	case reflect.Uint:
		*c = uintCodec[uint]()
	case reflect.Uint8:
		*c = uintCodec[uint8]()
	case reflect.Uint16:
		*c = uintCodec[uint16]()
	case reflect.Uint32:
		*c = uintCodec[uint32]()
	case reflect.Uint64:
		*c = uintCodec[uint64]()
	case reflect.Uintptr:
		*c = uintCodec[uintptr]()
	case reflect.Float32:
		*c = floatCodec[float32](32)
		if b.canonical {
			c.enc = encodeCanonicalFloat[float32](32)
		}
	case reflect.Float64:
		*c = floatCodec[float64](64)
		if b.canonical {
			c.enc = encodeCanonicalFloat[float64](64)
		}
	case reflect.Pointer:
		b.pointer(c, t)
	case reflect.Struct:
		b.structure(c, t)
	case reflect.Map:
		b.mapping(c, t)
	case reflect.Slice:
		if isByteSlice(t) {
			c.enc, c.dec = encodeBytes, decodeBytes
		} else {
			b.slice(c, t)
		}
	case reflect.Array:
		b.array(c, t)
	case reflect.Interface:
		c.enc, c.dec = interfaceCodec(t)
		if b.canonical {
			c.enc = encodeCanonicalInterface(t)
		}
	default:
		// Channels, functions, complex numbers: encoding/json's errors.
		b.failed = true
		return nil
	}
	return c
}

// decoder helpers for the compiled functions.

// at returns the byte at the current position, or 0 at the end.
func (d *decoder) at() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

// null passes over a null at the current position, if there is one.
func (d *decoder) null() bool {
	if hasLiteral(d.data, d.pos, "null") {
		d.pos += len("null")
		return true
	}
	return false
}

// Scalars.

func encodeBool(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
	if *(*bool)(p) {
		return append(dst, "true"...), nil
	}
	return append(dst, "false"...), nil
}

func decodeBool(d *decoder, p unsafe.Pointer) error {
	switch {
	case hasLiteral(d.data, d.pos, "true"):
		*(*bool)(p) = true
		d.pos += len("true")
	case hasLiteral(d.data, d.pos, "false"):
		*(*bool)(p) = false
		d.pos += len("false")
	case d.null():
	default:
		return errFallback
	}
	return nil
}

func encodeString(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
	return appendStringHTML(dst, *(*string)(p)), nil
}

func encodeCanonicalString(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
	return appendString(dst, *(*string)(p)), nil
}

func decodeString(d *decoder, p unsafe.Pointer) error {
	switch d.at() {
	case '"':
		s, err := d.stringValue()
		if err != nil {
			return err
		}
		*(*string)(p) = s
		return nil
	case 'n':
		if d.null() {
			return nil
		}
	}
	return errFallback
}

// numberAt returns the number literal at the current position, or false if
// there is none (null included: decoding null into a number does nothing).
func (d *decoder) numberAt() (lit []byte, ok bool) {
	c := d.at()
	if c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	lit, err := d.number()
	return lit, err == nil
}

func intCodec[I int | int8 | int16 | int32 | int64]() codec {
	return codec{
		enc: func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			return strconv.AppendInt(dst, int64(*(*I)(p)), 10), nil
		},
		dec: func(d *decoder, p unsafe.Pointer) error {
			lit, ok := d.numberAt()
			if !ok {
				return d.nullOrFallback()
			}
			n, err := strconv.ParseInt(unsafeString(lit), 10, 64)
			if err != nil || int64(I(n)) != n {
				return errFallback
			}
			*(*I)(p) = I(n)
			return nil
		},
	}
}

func uintCodec[U uint | uint8 | uint16 | uint32 | uint64 | uintptr]() codec {
	return codec{
		enc: func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			return strconv.AppendUint(dst, uint64(*(*U)(p)), 10), nil
		},
		dec: func(d *decoder, p unsafe.Pointer) error {
			lit, ok := d.numberAt()
			if !ok {
				return d.nullOrFallback()
			}
			n, err := strconv.ParseUint(unsafeString(lit), 10, 64)
			if err != nil || uint64(U(n)) != n {
				return errFallback
			}
			*(*U)(p) = U(n)
			return nil
		},
	}
}

func floatCodec[F float32 | float64](bits int) codec {
	return codec{
		enc: func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
			f := float64(*(*F)(p))
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return dst, errFallback
			}
			// As encoding/json writes floats: ES6's cut-offs between
			// plain and exponent notation, and exponents not padded.
			abs := math.Abs(f)
			format := byte('f')
			if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
				format = 'e'
			}
			dst = strconv.AppendFloat(dst, f, format, -1, bits)
			if format == 'e' {
				if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
					dst[n-2] = dst[n-1]
					dst = dst[:n-1]
				}
			}
			return dst, nil
		},
		dec: func(d *decoder, p unsafe.Pointer) error {
			lit, ok := d.numberAt()
			if !ok {
				return d.nullOrFallback()
			}
			f, err := strconv.ParseFloat(unsafeString(lit), bits)
			if err != nil {
				return errFallback
			}
			*(*F)(p) = F(f)
			return nil
		},
	}
}

// encodeCanonicalFloat writes floats as AppendCanonicalGo does.
func encodeCanonicalFloat[F float32 | float64](bits int) func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
	return func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
		g, err := floatValue(float64(*(*F)(p)), bits)
		if err != nil {
			return dst, errFallback
		}
		return appendCanonical(dst, g, 0)
	}
}

// nullOrFallback passes over a null, which leaves a scalar as it is, and
// hands anything else to encoding/json.
func (d *decoder) nullOrFallback() error {
	if d.null() {
		return nil
	}
	return errFallback
}

// Pointers, interfaces and byte slices.

func (b *codecBuilder) pointer(c *codec, t reflect.Type) {
	elemType := t.Elem()
	elem := b.compile(elemType)
	c.enc = func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		ptr := *(*unsafe.Pointer)(p)
		if ptr == nil {
			return append(dst, "null"...), nil
		}
		if depth >= maxEncodeDepth {
			return dst, errFallback
		}
		return elem.enc(dst, ptr, depth+1)
	}
	c.dec = func(d *decoder, p unsafe.Pointer) error {
		if d.null() {
			*(*unsafe.Pointer)(p) = nil
			return nil
		}
		ptr := *(*unsafe.Pointer)(p)
		if ptr == nil {
			ptr = reflect.New(elemType).UnsafePointer()
			*(*unsafe.Pointer)(p) = ptr
		}
		return elem.dec(d, ptr)
	}
}

// interfaceCodec encodes the value inside an interface with encoding/json,
// as encoding/json itself does, and leaves decoding into one (anything
// but null) to encoding/json.
func interfaceCodec(t reflect.Type) (
	func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error),
	func(d *decoder, p unsafe.Pointer) error,
) {
	enc := func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
		v := reflect.NewAt(t, p).Elem()
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		b, err := json.Marshal(v.Elem().Interface())
		if err != nil {
			return dst, errFallback
		}
		return append(dst, b...), nil
	}
	dec := func(d *decoder, p unsafe.Pointer) error {
		if d.null() {
			reflect.NewAt(t, p).Elem().SetZero()
			return nil
		}
		return errFallback
	}
	return enc, dec
}

// encodeCanonicalInterface writes the value inside an interface as
// AppendCanonicalGo does, by its reflective walk.
func encodeCanonicalInterface(t reflect.Type) func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error) {
	return func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		dst, err := appendCanonicalGo(dst, reflect.NewAt(t, p).Elem(), depth)
		if err != nil {
			return dst, errFallback
		}
		return dst, nil
	}
}

func encodeBytes(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
	b := *(*[]byte)(p)
	if b == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"'), nil
}

func decodeBytes(d *decoder, p unsafe.Pointer) error {
	if d.null() {
		*(*[]byte)(p) = nil
		return nil
	}
	if d.at() != '"' {
		return errFallback
	}
	b, err := d.base64String()
	if err != nil {
		return err
	}
	*(*[]byte)(p) = b
	return nil
}

// Structs.

// codecField is a struct field as the compiled functions see it.
type codecField struct {
	name   string
	key    []byte // the encoded name and its colon
	offset uintptr
	c      *codec
	// omit reports whether the field is left out of the encoding
	// (omitempty, omitzero); nil when it never is.
	omit func(p unsafe.Pointer) bool
}

func (b *codecBuilder) structure(c *codec, t reflect.Type) {
	info := structInfoOf(t)
	if info.viaEncodingJSON {
		b.failed = true
		return
	}
	fields := make([]codecField, len(info.fields))
	for i := range info.fields {
		fi := &info.fields[i]
		sf := t.Field(fi.index)
		f := &fields[i]
		f.name = fi.name
		f.key = append(b.quoter()(nil, fi.name), ':')
		f.offset = sf.Offset
		f.c = b.compile(sf.Type)
		switch {
		case fi.omitZero:
			if sf.Type.Implements(isZeroerType) || reflect.PointerTo(sf.Type).Implements(isZeroerType) {
				b.failed = true // its IsZero decides; leave it to encoding/json
				return
			}
			f.omit = func(p unsafe.Pointer) bool { return reflect.NewAt(sf.Type, p).Elem().IsZero() }
			if fi.omitEmpty {
				zero, empty := f.omit, emptiness(sf.Type)
				f.omit = func(p unsafe.Pointer) bool { return zero(p) || empty(p) }
			}
		case fi.omitEmpty:
			f.omit = emptiness(sf.Type)
		}
	}
	// encoding/json writes fields in their order, the canonical form in
	// the order of their names.
	order := make([]int, len(fields))
	for i := range order {
		order[i] = i
	}
	if b.canonical {
		order = info.sorted
	}
	c.enc = func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		dst = append(dst, '{')
		first := true
		for _, i := range order {
			f := &fields[i]
			fp := unsafe.Add(p, f.offset)
			if f.omit != nil && f.omit(fp) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, f.key...)
			var err error
			if dst, err = f.c.enc(dst, fp, depth); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	c.dec = func(d *decoder, p unsafe.Pointer) error {
		switch d.at() {
		case '{':
			return d.decodeStruct(info, fields, p)
		case 'n':
			return d.nullOrFallback()
		}
		return errFallback
	}
}

// emptiness returns omitempty's test for values of t: encoding/json's
// isEmptyValue.
func emptiness(t reflect.Type) func(p unsafe.Pointer) bool {
	switch t.Kind() {
	case reflect.String:
		return func(p unsafe.Pointer) bool { return len(*(*string)(p)) == 0 }
	case reflect.Slice:
		return func(p unsafe.Pointer) bool { return (*sliceHeader)(p).len == 0 }
	case reflect.Map:
		return func(p unsafe.Pointer) bool { return reflect.NewAt(t, p).Elem().Len() == 0 }
	case reflect.Array:
		empty := t.Len() == 0
		return func(unsafe.Pointer) bool { return empty }
	case reflect.Struct:
		return func(unsafe.Pointer) bool { return false }
	case reflect.Interface:
		return func(p unsafe.Pointer) bool { return reflect.NewAt(t, p).Elem().IsZero() }
	case reflect.Float32:
		return func(p unsafe.Pointer) bool { return *(*float32)(p) == 0 } // -0 too
	case reflect.Float64:
		return func(p unsafe.Pointer) bool { return *(*float64)(p) == 0 }
	}
	// Bools, integers and pointers: the zero value, all zero bits.
	return zeroBits(t.Size())
}

// zeroBits returns the test for a value of size bytes (1, 2, 4 or 8) whose
// bits are all zero.
func zeroBits(size uintptr) func(p unsafe.Pointer) bool {
	switch size {
	case 1:
		return func(p unsafe.Pointer) bool { return *(*uint8)(p) == 0 }
	case 2:
		return func(p unsafe.Pointer) bool { return *(*uint16)(p) == 0 }
	case 4:
		return func(p unsafe.Pointer) bool { return *(*uint32)(p) == 0 }
	}
	return func(p unsafe.Pointer) bool { return *(*uint64)(p) == 0 }
}

// decodeStruct decodes the object at the current position into the struct
// at p. encoding/json writes fields in their order, so the field after the
// last one decoded is tried before the look-up by name.
func (d *decoder) decodeStruct(info *structInfo, fields []codecField, p unsafe.Pointer) error {
	next := 0
	return d.members(func(name []byte) error {
		i := -1
		if next < len(fields) && string(name) == fields[next].name {
			i = next
		} else if j, ok := info.byName[string(name)]; ok {
			i = j
		}
		if i < 0 {
			if info.matchesFolded(string(name)) {
				return errFallback // encoding/json matches it without regard to case
			}
			return d.skip()
		}
		next = i + 1
		return fields[i].c.dec(d, unsafe.Add(p, fields[i].offset))
	})
}

// Maps, slices and arrays.

type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

func (b *codecBuilder) mapping(c *codec, t reflect.Type) {
	if t.Key().Kind() != reflect.String || !compiles(t.Key()) {
		b.failed = true
		return
	}
	if t == stringMapType {
		c.enc, c.dec = stringMapEncoder(b.quoter()), decodeStringMap
		return
	}
	quote := b.quoter()
	elemType := t.Elem()
	elem := b.compile(elemType)
	c.enc = func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		// A map variable is one pointer: nil needs no reflect.
		if *(*unsafe.Pointer)(p) == nil {
			return append(dst, "null"...), nil
		}
		if depth >= maxEncodeDepth {
			return dst, errFallback
		}
		m := reflect.NewAt(t, p).Elem()
		// Map elements are not addressable: each is copied into one
		// addressable value to be encoded from there.
		tmp := reflect.New(elemType).Elem()
		dst = append(dst, '{')
		err := eachMapMember(m, func(i int, name string, value reflect.Value) error {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = quote(dst, name)
			dst = append(dst, ':')
			tmp.Set(value)
			var err error
			dst, err = elem.enc(dst, tmp.Addr().UnsafePointer(), depth+1)
			return err
		})
		if err != nil {
			return dst, err
		}
		return append(dst, '}'), nil
	}
	c.dec = func(d *decoder, p unsafe.Pointer) error {
		if d.null() {
			*(*unsafe.Pointer)(p) = nil
			return nil
		}
		if d.at() != '{' {
			return errFallback
		}
		return d.mapInto(reflect.NewAt(t, p).Elem(), func(value reflect.Value) error {
			return elem.dec(d, value.Addr().UnsafePointer())
		})
	}
}

// stringKeys holds scratch slices that sort the keys of string maps.
var stringKeys = sync.Pool{New: func() any { return new([]string) }}

// stringMapEncoder returns the encoder of map[string]string, the type of
// HTTP headers, which needs no reflect; quote writes the strings.
func stringMapEncoder(quote func([]byte, string) []byte) func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
	return func(dst []byte, p unsafe.Pointer, _ int) ([]byte, error) {
		return encodeStringMap(dst, *(*map[string]string)(p), quote)
	}
}

func encodeStringMap(dst []byte, m map[string]string, quote func([]byte, string) []byte) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	if len(m) <= smallMap {
		// Sorted on the stack: HTTP responses carry a few headers.
		var entries [smallMap][2]string
		n := 0
		for k, v := range m {
			i := n
			for ; i > 0 && entries[i-1][0] > k; i-- {
				entries[i] = entries[i-1]
			}
			entries[i] = [2]string{k, v}
			n++
		}
		dst = append(dst, '{')
		for i, e := range entries[:n] {
			dst = appendMember(dst, i, e[0], e[1], quote)
		}
		return append(dst, '}'), nil
	}
	keys := stringKeys.Get().(*[]string)
	for k := range m {
		*keys = append(*keys, k)
	}
	slices.Sort(*keys)
	dst = append(dst, '{')
	for i, k := range *keys {
		dst = appendMember(dst, i, k, m[k], quote)
	}
	clear(*keys)
	*keys = (*keys)[:0]
	stringKeys.Put(keys)
	return append(dst, '}'), nil
}

// smallMap is the size up to which encodeStringMap sorts keys in place.
const smallMap = 8

// appendMember appends the i-th member of an object of strings.
func appendMember(dst []byte, i int, name, value string, quote func([]byte, string) []byte) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	dst = quote(dst, name)
	dst = append(dst, ':')
	return quote(dst, value)
}

func decodeStringMap(d *decoder, p unsafe.Pointer) error {
	if d.null() {
		*(*map[string]string)(p) = nil
		return nil
	}
	if d.at() != '{' {
		return errFallback
	}
	return d.stringMapInto((*map[string]string)(p))
}

func (b *codecBuilder) slice(c *codec, t reflect.Type) {
	elemType := t.Elem()
	elem := b.compile(elemType)
	size := elemType.Size()
	c.enc = func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		s := (*sliceHeader)(p)
		if s.data == nil {
			return append(dst, "null"...), nil
		}
		if depth >= maxEncodeDepth {
			return dst, errFallback
		}
		return encodeElements(dst, elem, s.data, s.len, size, depth+1)
	}
	c.dec = func(d *decoder, p unsafe.Pointer) error {
		if d.null() {
			*(*sliceHeader)(p) = sliceHeader{}
			return nil
		}
		if d.at() != '[' {
			return errFallback
		}
		return d.sliceInto(reflect.NewAt(t, p).Elem(), func(el reflect.Value) error {
			return elem.dec(d, el.Addr().UnsafePointer())
		})
	}
}

func (b *codecBuilder) array(c *codec, t reflect.Type) {
	elemType := t.Elem()
	elem := b.compile(elemType)
	size, length := elemType.Size(), t.Len()
	c.enc = func(dst []byte, p unsafe.Pointer, depth int) ([]byte, error) {
		return encodeElements(dst, elem, p, length, size, depth)
	}
	c.dec = func(d *decoder, p unsafe.Pointer) error {
		if d.null() {
			return nil
		}
		if d.at() != '[' {
			return errFallback
		}
		return d.arrayInto(reflect.NewAt(t, p).Elem(), func(el reflect.Value) error {
			return elem.dec(d, el.Addr().UnsafePointer())
		})
	}
}

func encodeElements(dst []byte, elem *codec, base unsafe.Pointer, n int, size uintptr, depth int) ([]byte, error) {
	dst = append(dst, '[')
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = elem.enc(dst, unsafe.Add(base, uintptr(i)*size), depth); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}
