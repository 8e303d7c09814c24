// Package jsonvalue handles the generic JSON values that JMESPath searches
// and that idempotency keys are hashed from: map[string]any, []any, string,
// float64, json.Number, bool and nil.
//
// It does three things the standard library does not do together:
//
//   - Decode parses JSON exactly: a number becomes a float64 only when the
//     float64 represents the written number exactly, and a json.Number
//     otherwise, so large integer IDs are never rounded.
//   - FromGo converts any Go value into the same generic form, as
//     encoding/json would encode it, without encoding it first.
//   - AppendCanonical writes a value as canonical JSON: object keys sorted,
//     numbers in one normal form, one escaping rule, so that equal values
//     give equal bytes whatever their key order or number spelling.
//
// Beside them, Codec encodes and decodes the Go values handlers return
// (stored responses) with the results of encoding/json, and
// CanonicalEncoder writes Go values in AppendCanonical's form (whole
// inputs as keys), through functions compiled once per type.
//
// Decode and FromGo take a Selection, the parts of the value a reader needs;
// everything else is skipped without being materialised.
package jsonvalue
