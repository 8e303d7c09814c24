// Package persistence defines the storage contract of the idempotency
// library. A [Record] is kept for each idempotency key. A [Store]
// reserves, reads, completes and releases records.
//
// A Store is deliberately small: four methods, each one request to the
// backing service, each atomic. All policy (when to retry, what a
// conflict means, how a response is encoded) lives in package
// idempotency. What each write does to the record in each state it can
// find is the table of docs/protocol.md, which package storetest runs
// against a store. Stores that hold their records in the process may also
// implement [LocalReader], and stores that commit writes of a function's own
// with a completion [Committer]. Stores that wake waiting calls implement
// [Notifier], and stores that operators' tools read [Admin].
//
// The package imports only the standard library, so that stores can be
// written without depending on the rest of the library.
package persistence

import (
	"context"
	"errors"
	"time"
)

// Status is the stored state of a record. "Expired" is not a status. It is
// derived from the record's expiry times and the current time (see
// [Record.Live]), because storage services delete expired items late or
// never.
type Status string

const (
	// StatusInProgress marks a key reserved by an invocation that has not
	// finished yet.
	StatusInProgress Status = "INPROGRESS"
	// StatusCompleted marks a key whose invocation finished; the record holds
	// its response (or a recorded error).
	StatusCompleted Status = "COMPLETED"
)

// Record is what a Store keeps for one idempotency key.
//
// Records returned by a Store are owned by the caller but may share their
// Response bytes with the store's own copy: treat them as read-only.
type Record struct {
	// Key is the full idempotency key, for example "orders.handler#9f86d0...".
	Key string

	// Status is StatusInProgress while the owning invocation runs and
	// StatusCompleted once it has finished.
	Status Status

	// ExpiresAt is when the record stops counting, whatever its status. Stores
	// may keep it with one-second precision (DynamoDB's TTL attribute is in
	// epoch seconds), so callers set it to a whole second.
	ExpiresAt time.Time

	// InProgressExpiresAt is when an in-progress record stops blocking its key:
	// the deadline of the invocation that reserved it. A crashed invocation's
	// key becomes usable again at this time, not at ExpiresAt. Stores keep it
	// with at least millisecond precision. Zero means no in-progress expiry.
	InProgressExpiresAt time.Time

	// PayloadHash fingerprints the part of the input that must not change
	// between retries with one key. Empty when payload validation is off.
	PayloadHash string

	// Token identifies the invocation that wrote the record. Update and
	// Delete succeed only when it matches and the record is in progress.
	// So a late finisher can never overwrite or delete the record of an
	// invocation that took over after it. Nor can a late write reopen a
	// completed record.
	Token string

	// Response is the encoded result of a completed invocation. It may be
	// empty, or absent when ResponseOmitted is set or an error was recorded.
	Response []byte

	// ResponseOmitted is set when the response was too large for the store,
	// and the record was completed without it. The side effect happened,
	// but its result cannot be replayed.
	ResponseOmitted bool

	// Held is set on a reservation that keeps its key when it lapses. No
	// other call takes it over. Only an operator's release
	// ([Admin.DeleteRecord]) or the record's expiry frees the key. Its
	// in-progress expiry still tells a call that runs from one that ended
	// without an outcome.
	Held bool

	// ErrorType and ErrorMessage hold a handler error that was recorded in
	// place of a response, because the caller classified it as permanent.
	// ErrorType is empty when no error was recorded.
	ErrorType    string
	ErrorMessage string
}

// Live reports whether the record still holds its key at time now. A live
// record has not reached ExpiresAt. If it is in progress and not Held, it
// has not reached InProgressExpiresAt either. A record that is not live may be
// overwritten by a new reservation.
func (r *Record) Live(now time.Time) bool {
	if r.ExpiresAt.Before(now) {
		return false
	}
	if r.Status == StatusInProgress && !r.Held && !r.InProgressExpiresAt.IsZero() && r.InProgressExpiresAt.Before(now) {
		return false
	}
	return true
}

// Lapsed reports whether the record is a reservation past its in-progress
// expiry at now: a call that has ended without an outcome, or runs late.
func (r *Record) Lapsed(now time.Time) bool {
	return r.Status == StatusInProgress && !r.InProgressExpiresAt.IsZero() && r.InProgressExpiresAt.Before(now)
}

// Store keeps idempotency records. Implementations must be safe for
// concurrent use. Each method must be atomic with respect to the others,
// across every process that shares the backing storage.
type Store interface {
	// Put reserves rec.Key by writing rec, but only if no live record (see
	// Record.Live, evaluated at now) exists for the key. When a live record
	// exists, Put writes nothing and returns a *ConflictError. The error
	// carries the existing record if the store could read it in the same
	// atomic step.
	Put(ctx context.Context, rec *Record, now time.Time) error

	// Get returns the record for key with a strongly consistent read, whether
	// or not it is live. It returns ErrNotFound when there is none. A store
	// that evicts records once their ExpiresAt has passed may return
	// ErrNotFound for them.
	Get(ctx context.Context, key string) (*Record, error)

	// Update replaces the record for rec.Key with rec, a renewal or a
	// completion. It does so only for the caller's own reservation, which
	// carries rec.Token and is in progress. A completion that finds the caller's
	// own completed record writes nothing and succeeds. Otherwise Update
	// writes nothing and returns ErrFenced. A store that cannot fit
	// rec.Response completes the record without it and returns
	// ErrResponseOmitted.
	Update(ctx context.Context, rec *Record) error

	// Delete removes the record for key if it is the caller's own
	// reservation: it carries token and is in progress. It succeeds when
	// there is no record, and returns ErrFenced, deleting nothing, for any
	// other record.
	Delete(ctx context.Context, key, token string) error
}

// LocalReader is implemented by stores that hold records, or a cache of
// them, in the process: the memory store and the local cache. The library
// reads them before a reservation, so that a completed key is answered
// without the write. A store that would make a request to read must not
// implement it.
type LocalReader interface {
	// ReadLocal returns a copy of the record for key that the store holds
	// in the process, if it is completed and live at now. Otherwise it
	// returns nil.
	// It makes no request to any service.
	ReadLocal(key string, now time.Time) *Record
}

// A Notifier is a Store that wakes the calls waiting for a key
// (idempotency.WithWait) when its reservation ends. They need not poll
// for it then. A wake-up is a hint: the waiter still polls, less often,
// in case one is lost.
type Notifier interface {
	Store

	// Watch starts watching key, and returns once it watches. From then
	// on woken receives a value after each completion or release of key.
	// Those are Update to completed, Delete and Admin.DeleteRecord. It
	// also receives one whenever a wake-up may have been lost. It never
	// blocks a sender: one value stands for any number. stop ends the
	// watch. Watch returns an error when it cannot watch by ctx's end.
	//
	// A value is the completed record, as Get would have returned it
	// then, or nil. Nil means "read the record": a release, a lost
	// wake-up, several at once, or a record too large to send.
	Watch(ctx context.Context, key string) (woken <-chan *Record, stop func(), err error)
}

// An Admin is a store that operators' tools read and release records
// through, as the retrysafe command does. Every store of this module is
// one.
type Admin interface {
	// List calls page with the records whose key starts with keyPrefix,
	// without their responses. It gives about pageSize at a time, or the
	// store's default for 0. It stops when there are none left, or when
	// page returns an error, which List returns.
	List(ctx context.Context, keyPrefix string, pageSize int, page func([]*Record) error) error

	// DeleteRecord deletes the record for seen.Key if it is still the
	// record seen (docs/protocol.md, the operator's release). It returns
	// ErrChanged when the record changed since, ErrNotFound when there is
	// none, and deletes nothing then.
	DeleteRecord(ctx context.Context, seen *Record) error
}

var (
	// ErrNotFound is returned by Store.Get when no record exists for the key.
	ErrNotFound = errors.New("persistence: record not found")

	// ErrConflict is matched (with errors.Is) by every *ConflictError.
	ErrConflict = errors.New("persistence: a live record already exists")

	// ErrFenced is returned by Store.Update, Store.Delete and
	// Committer.Commit when the stored record is not the caller's own
	// reservation. Another invocation has taken the key over, the record
	// is gone, or it has completed.
	ErrFenced = errors.New("persistence: record is owned by another invocation")

	// ErrChanged is returned by Admin.DeleteRecord when the stored record
	// is no longer the one the caller read. Operators' tools use it to
	// delete a record they have read. The record completed, its lease was
	// renewed, or another invocation took the key over. Nothing was
	// deleted.
	ErrChanged = errors.New("persistence: the record changed since it was read")

	// ErrResponseOmitted is returned (possibly wrapped) by Store.Update when
	// the record's response was too large for the store. The record was
	// written, completed, with ResponseOmitted set and no response. The update
	// itself succeeded, so the key stays completed and the side effect is not
	// run again; replays report that the response is not available.
	ErrResponseOmitted = errors.New("persistence: response too large to store; record completed without it")
)

// ConflictError is returned by Store.Put when a live record already holds
// the key.
type ConflictError struct {
	// Existing is the record that holds the key, read atomically with the
	// failed write. It is nil when the store cannot return it that way; the
	// caller then reads it with Get.
	Existing *Record
}

// Error implements error.
func (e *ConflictError) Error() string {
	if e.Existing != nil {
		return "persistence: a live record already exists for key " + e.Existing.Key
	}
	return ErrConflict.Error()
}

// Is makes errors.Is(err, ErrConflict) true for every *ConflictError.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
