// Package linearize checks that a store behaves, under concurrent
// clients and faults, as one sequential execution of the protocol's
// table (internal/protocol). It records each store call with the times
// it was made and returned, and checks each key's history with
// Porcupine (github.com/anishathalye/porcupine).
//
// The model is one key's record. Its step function looks the write up in
// the table, in the state the writer finds. It only says what a write
// that applies leaves. Two freedoms of a real store are in the model. A
// store may delete an expired record at any time. A write may reach the
// store twice, when a client retried it after losing its reply. The
// earlier attempt may take effect at any point of the call, and the reply
// is the last attempt's. A call whose outcome the caller did not learn may take
// effect at any time after it was made, or never.
//
// A [Workload] drives many keys with several clients each, as the
// library calls a store, with late and duplicated writes, and faults
// from package faultstore. [Check] checks the keys apart, so that each
// check stays small. A key that is not linearizable is reported with the
// shortest prefix of its history that is not, and Porcupine's
// visualization of it.
package linearize
