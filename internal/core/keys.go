package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/retrysafe/retrysafe/internal/canonical"
	"github.com/retrysafe/retrysafe/jmespath"
)

// Key returns the record key of key material: prefix, "#", and the hex
// SHA-256 of material (docs/keys.md). With a tenant ID, the tenant's mark
// (TenantMark), the escaped tenant ID and "#" come before the hash, so that
// records of different tenants never share a key, nor with a key without
// a tenant.
func Key(prefix, tenant string, material []byte) string {
	sum := sha256.Sum256(material)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	if tenant == "" {
		return prefix + "#" + string(h[:]) // one allocation
	}
	return prefix + TenantMark + escapeTenant(tenant) + "#" + string(h[:])
}

// TenantMark starts the tenant's part of a record key. A key prefix must
// not contain it: then the mark's first occurrence in a key tells where
// the prefix ends.
const TenantMark = "#tenant="

// CheckPrefix reports a key prefix that contains TenantMark.
func CheckPrefix(prefix string) error {
	if strings.Contains(prefix, TenantMark) {
		return fmt.Errorf("key prefix %q contains %q, which marks the tenant of a key", prefix, TenantMark)
	}
	return nil
}

// escapeTenant returns tenant with every byte but the unreserved
// characters of RFC 3986 (A-Z a-z 0-9 - . _ ~) written %XX, upper-case, so
// that it never contains "#".
func escapeTenant(tenant string) string {
	const hexDigits = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(tenant); i++ {
		if !unreserved(tenant[i]) {
			n++
		}
	}
	if n == 0 {
		return tenant
	}
	b := make([]byte, 0, len(tenant)+2*n)
	for i := 0; i < len(tenant); i++ {
		if c := tenant[i]; unreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return string(b)
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// SplitKey returns the parts of a record key made by Key: its prefix, its
// tenant ID ("" without one) and its hash. ok is false for a key that Key
// did not make.
func SplitKey(key string) (prefix, tenant, hash string, ok bool) {
	i := strings.LastIndexByte(key, '#')
	if i < 0 || len(key)-i-1 != 2*sha256.Size {
		return "", "", "", false
	}
	prefix, hash = key[:i], key[i+1:]
	if _, err := hex.DecodeString(hash); err != nil {
		return "", "", "", false
	}
	p, escaped, found := strings.Cut(prefix, TenantMark)
	if !found {
		return prefix, "", hash, true
	}
	t, err := url.PathUnescape(escaped)
	if err != nil || escapeTenant(t) != escaped {
		return "", "", "", false
	}
	return p, t, hash, true
}

// StepMark starts a step's part of a step key (StepKey).
const StepMark = "#step="

// MaxStepName is the longest step name, in bytes.
const MaxStepName = 128

// StepKey returns the record key of the step name of the call whose record
// key is callKey: callKey, StepMark and the escaped name (docs/keys.md).
// The escaped name contains no "#", so no step key equals a call's key or
// another step's key.
func StepKey(callKey, name string) string {
	return callKey + StepMark + escapeTenant(name)
}

// CheckStepName reports a step name that StepKey does not take: an empty
// one, or one longer than MaxStepName bytes.
func CheckStepName(name string) error {
	switch {
	case name == "":
		return errors.New("empty step name")
	case len(name) > MaxStepName:
		return fmt.Errorf("step name of %d bytes, longer than %d", len(name), MaxStepName)
	}
	return nil
}

// TenantOf returns the tenant ID of the Lambda invocation of ctx, or "":
// that of a function in tenant isolation mode.
func TenantOf(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.TenantID
	}
	return ""
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
	if expr == nil {
		material, err = canonical.AppendGo(dst, in)
		if err != nil {
			return dst, false, err
		}
		return material, canonical.NoKeyForm(material[len(dst):]), nil
	}
	v, err := expr.SearchValue(in)
	if err != nil {
		return dst, false, err
	}
	material, err = canonical.Append(dst, v)
	return material, canonical.NoKey(v), err
}

// CompileKey compiles an expression that derives a key or a payload hash,
// which must give one result for one input: expressions whose result
// depends on the order of object members, which Go maps do not keep, are
// refused.
func CompileKey(expr string) (*jmespath.Expression, error) {
	e, err := jmespath.Compile(expr)
	if err != nil {
		return nil, err
	}
	if e.OrderDependent() {
		return nil, fmt.Errorf("expression %q depends on the order of object members (a value projection such as headers.*, or keys(), values(), items()), which Go maps do not keep; select members by name", expr)
	}
	return e, nil
}

// Derive returns the record key of in with prefix and tenant, and its
// payload hash ("" when validation is nil), as idempotency.Wrap derives
// them: Key of
// the material that key selects from in (see AppendMaterial; nil selects
// the whole input), and Hash of the material that validation selects. It
// fails with a *DeriveError when key selects no key or an expression
// fails on in.
func Derive(prefix, tenant string, key, validation *jmespath.Expression, in any) (recordKey, payloadHash string, err error) {
	// Material is hashed, not kept: its buffer is used again. The whole
	// input's is as long as the input's JSON.
	buf := materials.Get().(*[]byte)
	defer func() {
		if cap(*buf) > 64<<10 {
			*buf = nil // grown too large to keep
		}
		materials.Put(buf)
	}()
	material, noKey, err := AppendMaterial((*buf)[:0], key, in)
	*buf = material
	switch {
	case err != nil:
		return "", "", &DeriveError{Expression: source(key), Err: err}
	case noKey:
		// As in Powertools: null, "", and arrays or objects of nulls only
		// are no key.
		return "", "", &DeriveError{Expression: source(key)}
	}
	recordKey = Key(prefix, tenant, material)
	if validation != nil {
		material, _, err := AppendMaterial(material[:0], validation, in)
		*buf = material
		if err != nil {
			return "", "", &DeriveError{Expression: validation.String(), Err: fmt.Errorf("payload validation: %w", err)}
		}
		payloadHash = Hash(material)
	}
	return recordKey, payloadHash, nil
}

// materials keeps the buffers of Derive's key material.
var materials = sync.Pool{New: func() any { return new([]byte) }}

// DeriveError is why Derive found no key in an input.
type DeriveError struct {
	// Expression is the expression that failed, "" for the whole input.
	Expression string
	// Err is why; nil when the key expression selected no key.
	Err error
}

// Error implements error, with the words of idempotency.KeyError, which
// the library returns in its place.
func (e *DeriveError) Error() string {
	what := "the input"
	if e.Expression != "" {
		what = fmt.Sprintf("key expression %q", e.Expression)
	}
	if e.Err == nil {
		return what + " selected no idempotency key (null, empty or only nulls)"
	}
	return "selecting the idempotency key with " + what + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *DeriveError) Unwrap() error { return e.Err }

// source returns the text of e, or "" for the whole input.
func source(e *jmespath.Expression) string {
	if e == nil {
		return ""
	}
	return e.String()
}
