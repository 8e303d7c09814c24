package core

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/retrysafe/retrysafe/internal/canonical"
	"github.com/retrysafe/retrysafe/jmespath"
)

// Key returns the record key of key material: prefix, "#", and the hex
// SHA-256 of material (docs/keys.md).
func Key(prefix string, material []byte) string {
	sum := sha256.Sum256(material)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return prefix + "#" + string(h[:]) // one allocation
}

// Hash returns the hex SHA-256 of b: the hash part of keys, and payload
// hashes.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// AppendMaterial appends the key material of in to dst, as
// idempotency.Wrap derives it: the canonical JSON of the whole input (expr
// nil) or of what expr selects from it, both as encoding/json encodes in.
// noKey reports a selection that names no key (null, "", or an array or
// object of nulls only), which is still material for a payload hash.
func AppendMaterial(dst []byte, expr *jmespath.Expression, in any) (material []byte, noKey bool, err error) {
	var v any
	if expr == nil {
		v, err = canonical.FromGo(in)
	} else {
		v, err = expr.SearchValue(in)
	}
	if err != nil {
		return dst, false, err
	}
	material, err = canonical.Append(dst, v)
	return material, canonical.NoKey(v), err
}
