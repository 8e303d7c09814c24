package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/retrysafe/retrysafe/internal/canonical"
)

// keying is what the adapters make of a request before they call the
// Guard: its key and fingerprint, or why it has none.
type keying struct {
	// key is the Guard's key, the canonical JSON of [scope, idempotency
	// key], and fingerprint the material of its payload hash.
	key, fingerprint []byte
	// pass is set when the request runs the handler unprotected: its
	// method needs no key, or it has none and keys are optional.
	pass bool
	// refusal, when set, is the problem the request is answered with
	// (400), and detail its detail.
	refusal problemKind
	detail  string
	// bodyErr is why the request's body could not be read whole
	// (Middleware reads it for the fingerprint).
	bodyErr error
	// err is why the request has no key when the adapter cannot say that
	// to the client: the scope function failed (failed names what), and
	// with refusal, the scope function's ErrNoScope.
	err    error
	failed string
}

// keyRequest derives the key and fingerprint of r, as the adapters do for
// every request and RecordKey does for one.
func (c *config) keyRequest(ctx context.Context, r *Request) keying {
	if !c.keyed(r.Method) {
		return keying{pass: true}
	}
	idemKey, present, reason := parseKey(r.Values(c.header))
	switch {
	case !present && c.optionalKey:
		return keying{pass: true}
	case !present:
		return keying{refusal: missingKey, detail: "A " + r.Method + " request to this API needs the " + c.header +
			" header. Generate a unique key (a UUID) for each operation and send it with every retry of that operation."}
	case reason != "":
		return keying{refusal: invalidKey, detail: "The " + c.header + " header " + reason + "."}
	}

	var scope any // null without a scope function, so no scope equals none
	if c.scope != nil {
		s, err := c.scope(ctx, r)
		if err == nil && s == "" {
			err = fmt.Errorf("%w: the scope function returned an empty scope", ErrNoScope)
		}
		switch {
		case errors.Is(err, ErrNoScope):
			return keying{refusal: missingScope, detail: c.detail(missingScope), err: err}
		case err != nil:
			return keying{err: err, failed: "scope function"}
		}
		scope = s
	}
	if r.readBody != nil {
		if err := r.readBody(); err != nil {
			return keying{bodyErr: err}
		}
	}
	// Neither can fail with the values they are given: a failure is the
	// adapter's own.
	key, err := canonical.Append(nil, []any{scope, idemKey})
	if err != nil {
		return keying{err: err, failed: "deriving the idempotency key"}
	}
	fingerprint, err := c.fingerprint(r)
	if err != nil {
		return keying{err: err, failed: "deriving the idempotency key"}
	}
	return keying{key: key, fingerprint: fingerprint}
}

// fingerprint returns the fingerprint material of r, which the Guard
// hashes into the payload hash: the canonical JSON of [method, path, hex
// SHA-256 of the body, {header: [values]}], followed by {parameter:
// [values]} when the request has a query string. The
// body is hashed as the client sent it, after base64 decoding when the
// event says it is encoded (a body that does not decode is hashed as it
// is), so that a retry's body compares equal whether or not API Gateway
// chose to encode it. Query parameters are compared as the event carries
// them, in any order. The scope is in the key, not here.
func (c *config) fingerprint(r *Request) ([]byte, error) {
	sum := sha256.Sum256(r.bodyBytes())
	headers := make(map[string]any, len(c.fingerprintHeaders))
	for _, name := range c.fingerprintHeaders {
		if values := r.Values(name); len(values) > 0 {
			headers[name] = anyList(values)
		}
	}
	parts := []any{r.Method, r.Path, hex.EncodeToString(sum[:]), headers}
	// Without a query string the material is what it was before queries
	// counted, so that such requests keep their fingerprints.
	if query := r.queryValues(); len(query) > 0 {
		parts = append(parts, query)
	}
	return canonical.Append(nil, parts)
}

// bodyBytes returns the body as the client sent it.
func (r *Request) bodyBytes() []byte {
	if r.raw != nil {
		return r.raw
	}
	if r.base64 {
		if decoded, err := base64.StdEncoding.DecodeString(r.body); err == nil {
			return decoded
		}
	}
	return []byte(r.body)
}
