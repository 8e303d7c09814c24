// Package uuid makes the keys that clients send: random (version 4)
// UUIDs, as AIP-155 and the IETF Idempotency-Key draft recommend.
package uuid

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns a random (version 4) UUID from crypto/rand, in its
// 36-character text form.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:])  // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}
