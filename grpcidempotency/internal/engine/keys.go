package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// source says where a call's key came from.
type source int

const (
	noSource source = iota
	fromField
	fromMetadata
)

// keyOf returns the key of a call under policy p, and where it came from;
// reason, when not empty, says why the key that the call carries is not
// valid, in words that complete "The idempotency key ...".
func (c *Config) keyOf(p Policy, call *Call) (key string, from source, reason string) {
	field := func() string {
		if p.Keys == MetadataOnly {
			return ""
		}
		return c.fieldKey(call.Request)
	}
	metadata := func() (string, bool, string) {
		if p.Keys == FieldOnly || len(call.Metadata) == 0 {
			return "", false, ""
		}
		key := call.Metadata[0]
		for _, v := range call.Metadata[1:] {
			if v != key {
				return "", true, "comes in several different values; send one"
			}
		}
		return key, true, ""
	}
	if p.Keys == MetadataFirst || p.Keys == MetadataOnly {
		if key, ok, reason := metadata(); ok {
			return key, fromMetadata, cmpReason(reason, checkKey(key))
		}
		if key := field(); key != "" {
			return key, fromField, checkKey(key)
		}
		return "", noSource, ""
	}
	if key := field(); key != "" {
		return key, fromField, checkKey(key)
	}
	if key, ok, reason := metadata(); ok {
		return key, fromMetadata, cmpReason(reason, checkKey(key))
	}
	return "", noSource, ""
}

func cmpReason(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fieldKey returns the key in the request message: KeyFunc's, or the
// value of the singular string field named KeyField; "" when there is
// none.
func (c *Config) fieldKey(m proto.Message) string {
	if m == nil {
		return ""
	}
	if c.KeyFunc != nil {
		return c.KeyFunc(m)
	}
	r := m.ProtoReflect()
	fd := KeyField(r.Descriptor(), c.KeyField)
	if fd == nil {
		return ""
	}
	return r.Get(fd).String()
}

// KeyField returns the field of messages of type md that carries the
// key: the singular string field named name, or nil.
func KeyField(md protoreflect.MessageDescriptor, name protoreflect.Name) protoreflect.FieldDescriptor {
	fd := md.Fields().ByName(name)
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.Cardinality() == protoreflect.Repeated {
		return nil
	}
	return fd
}

// checkKey returns why key is not a valid key, or "".
func checkKey(key string) string {
	switch {
	case key == "":
		return "is empty"
	case !utf8.ValidString(key):
		return "is not valid UTF-8"
	case utf8.RuneCountInString(key) > MaxKeyLength:
		return "is longer than 255 characters"
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return "contains control characters"
		}
	}
	return ""
}

// material returns the key material of a call, which the Guard hashes
// into the record's key: the JSON array [scope, key], with null for no
// scope, so that callers in different scopes never share a record.
func material(scope *string, key string) string {
	b, _ := json.Marshal([]any{scope, key}) // strings: cannot fail
	return string(b)
}

// fingerprint returns the payload of a call, which the Guard hashes into
// the record's payload hash: the hex SHA-256 of the full method name, a
// zero byte and the request's deterministic protobuf encoding. A retry
// with the same key and another request, or the same request to another
// method, does not match it.
func fingerprint(method string, req proto.Message) (string, error) {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	if req != nil {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])), nil
}
