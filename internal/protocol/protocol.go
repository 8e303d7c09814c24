// Package protocol is the protocol of the idempotency record as data: for
// each write a caller sends and each state the record can be in when the
// write arrives, whether the write applies. It is the one description that
// docs/protocol.md shows, that the model checker's table (model/table.pml)
// is generated from, and that persistence/storetest runs against every
// store, so that the three cannot drift apart.
//
// A state is seen from the writer: "own" records carry the writer's owner
// token, "other" records another token. A write arrives in any state,
// including states its sender never saw: a write can be applied late, after
// its sender gave up and the record moved on.
package protocol

import (
	"fmt"
	"strings"
)

// Write is a kind of write to the record of a key.
type Write int

// The writes, in the order a call sends them.
const (
	// Reserve writes an in-progress record with a new owner token, where
	// no live record holds the key. Over a record that is not live (a
	// lapsed reservation, an expired record) it is a takeover.
	Reserve Write = iota
	// Renew extends the in-progress expiry of the caller's reservation
	// (a lease renewal).
	Renew
	// Complete stores the result of the caller's function and makes the
	// record completed.
	Complete
	// RecordError stores an error of the caller's function in place of a
	// result (a permanent error) and makes the record completed.
	RecordError
	// Release deletes the caller's reservation, so that a retry can run.
	Release
	// Commit is Complete together with the function's own writes (staged,
	// or made in the store's transaction), in one atomic step: they apply
	// exactly when the completion does.
	Commit
	// WriteStep writes a step's result (idempotency.Step) as a completed
	// record under the step's own key, where no live record holds it:
	// the first result written wins. A step's key holds no reservation,
	// so its in-progress states do not occur.
	WriteStep

	numWrites
)

// Writes are the writes, in order.
var Writes = []Write{Reserve, Renew, Complete, RecordError, Release, Commit, WriteStep}

var writeNames = [numWrites]string{"reserve", "renew", "complete", "record an error", "release", "commit", "write a step"}

// String returns the write's name as docs/protocol.md writes it.
func (w Write) String() string { return writeNames[w] }

// Ident returns the write's name as an identifier: "RECORD_ERROR".
func (w Write) Ident() string { return ident(writeNames[w]) }

// Fenced reports whether the write is conditioned on the caller's owner
// token: every write but Reserve and WriteStep.
func (w Write) Fenced() bool { return w != Reserve && w != WriteStep }

// State is the state of a key's record when a write arrives, seen from the
// write's sender.
type State int

// The states.
const (
	// Absent: no record. Never written, released, or deleted by the store
	// after it expired.
	Absent State = iota
	// OwnInProgress: the sender's reservation, live.
	OwnInProgress
	// OwnLapsed: the sender's reservation, past its in-progress expiry
	// (the sender ran past its deadline, or stopped renewing), and not
	// taken over.
	OwnLapsed
	// OtherInProgress: another call's reservation, live.
	OtherInProgress
	// OtherLapsed: another call's reservation, past its in-progress
	// expiry.
	OtherLapsed
	// OwnCompleted: completed by the sender, live.
	OwnCompleted
	// OwnExpired: completed by the sender, past its expiry.
	OwnExpired
	// OtherCompleted: completed by another call, live.
	OtherCompleted
	// OtherExpired: completed by another call, past its expiry.
	OtherExpired
	// OwnHeld: the sender's reservation, past its in-progress expiry, and
	// held (idempotency.WithHoldUntilReleased): nobody takes it over.
	OwnHeld
	// OtherHeld: another call's reservation, held, past its in-progress
	// expiry.
	OtherHeld

	numStates
)

// States are the states, in order.
var States = []State{Absent, OwnInProgress, OwnLapsed, OtherInProgress, OtherLapsed, OwnCompleted, OwnExpired, OtherCompleted, OtherExpired, OwnHeld, OtherHeld}

var stateNames = [numStates]string{
	"absent",
	"own in progress",
	"own lapsed",
	"other in progress",
	"other lapsed",
	"own completed",
	"own expired",
	"other completed",
	"other expired",
	"own held",
	"other held",
}

// String returns the state's name as docs/protocol.md writes it.
func (s State) String() string { return stateNames[s] }

// Ident returns the state's name as an identifier: "OWN_LAPSED".
func (s State) Ident() string { return ident(stateNames[s]) }

// Own reports whether the record carries the sender's token.
func (s State) Own() bool {
	switch s {
	case OwnInProgress, OwnLapsed, OwnCompleted, OwnExpired, OwnHeld:
		return true
	}
	return false
}

// InProgress reports whether the record is in progress.
func (s State) InProgress() bool {
	switch s {
	case OwnInProgress, OwnLapsed, OtherInProgress, OtherLapsed, OwnHeld, OtherHeld:
		return true
	}
	return false
}

// Completed reports whether the record is completed.
func (s State) Completed() bool { return s != Absent && !s.InProgress() }

// Live reports whether the record holds its key (persistence.Record.Live).
func (s State) Live() bool {
	switch s {
	case OwnInProgress, OtherInProgress, OwnCompleted, OtherCompleted, OwnHeld, OtherHeld:
		return true
	}
	return false
}

// Held reports whether the record is a held reservation past its
// in-progress expiry: it still holds its key.
func (s State) Held() bool { return s == OwnHeld || s == OtherHeld }

// Expired reports whether the record is past its expiry. A store may
// delete an expired record at any time (Redis does at once, DynamoDB's TTL
// within days, the memory store as it sweeps): an expired state may turn
// into Absent, and a write must then have the outcome it has on Absent.
func (s State) Expired() bool { return s == OwnExpired || s == OtherExpired }

// Outcome is what a write does in a state.
type Outcome int

// The outcomes.
const (
	// Applies: the write takes effect.
	Applies Outcome = iota + 1
	// Conflict: a reservation that finds a live record writes nothing and
	// returns that record (persistence.ConflictError).
	Conflict
	// Refused: a fenced write writes nothing and says so
	// (persistence.ErrFenced): the record is not the caller's own
	// reservation.
	Refused
	// Done: the write finds its own effect already there (an earlier
	// attempt of the same write, whose reply was lost, applied it), writes
	// nothing, and reports success.
	Done
)

var outcomeNames = [...]string{Applies: "applies", Conflict: "conflict", Refused: "refused", Done: "done"}

// String returns the outcome's name as docs/protocol.md writes it.
func (o Outcome) String() string { return outcomeNames[o] }

// Ident returns the outcome's name as an identifier: "APPLIES".
func (o Outcome) Ident() string { return ident(outcomeNames[o]) }

// Row is one cell of the table: what Write does in State, and why.
type Row struct {
	Write   Write
	State   State
	Outcome Outcome
	Why     string
}

// Table is the protocol: every write in every state. It is built by rule
// (see outcome), one rule per write, so that each row's reason is the
// rule's.
var Table = func() []Row {
	rows := make([]Row, 0, int(numWrites)*int(numStates))
	for _, w := range Writes {
		for _, s := range States {
			o, why := outcome(w, s)
			rows = append(rows, Row{Write: w, State: s, Outcome: o, Why: why})
		}
	}
	return rows
}()

// Lookup returns the outcome of w in s.
func Lookup(w Write, s State) Outcome { return Table[int(w)*int(numStates)+int(s)].Outcome }

// outcome is the protocol's rule for each write.
func outcome(w Write, s State) (Outcome, string) {
	switch w {
	case Reserve:
		// The condition looks at liveness only, never at the token: a
		// reservation carries a new token, so a record with it can only
		// be the same reservation, written by an attempt whose reply was
		// lost, and the caller tells it apart by its token.
		switch {
		case s == Absent:
			return Applies, "the key is free"
		case s == OwnInProgress || s == OwnHeld:
			return Conflict, "the caller's own earlier attempt, whose reply was lost: the conflict returns it, and the caller, seeing its token, holds the key"
		case s == OtherHeld:
			return Conflict, "held: the call that reserved it ended without an outcome, and only the operator's release, or the record's expiry, frees the key"
		case s == OwnCompleted:
			return Conflict, "a duplicate of the caller's reservation, applied after the caller completed: a live record holds the key"
		case s.Live():
			return Conflict, "a live record holds the key"
		case s.InProgress():
			return Applies, "takeover: the reservation lapsed"
		default:
			return Applies, "takeover: the record expired"
		}
	case Renew:
		switch {
		case s == OwnInProgress || s == OwnLapsed || s == OwnHeld:
			return Applies, "the caller's own reservation, not taken over: the in-progress expiry becomes the later of the two, so that an earlier renewal applied after a later one changes nothing"
		case s.Own():
			return Refused, "completed: a renewal applied late must not reopen the key"
		case s == Absent:
			return Refused, "released or deleted: a renewal must not recreate it"
		default:
			return Refused, "another call's record"
		}
	case Complete, RecordError, Commit:
		switch {
		case s == OwnInProgress || s == OwnLapsed || s == OwnHeld:
			if w == Commit {
				return Applies, "the caller's own reservation: the completion and the function's writes apply together"
			}
			return Applies, "the caller's own reservation, not taken over"
		case s.Own():
			if w == Commit {
				return Done, "the caller's own commit applied already: nothing is written again, the function's writes included"
			}
			return Done, "the caller's own completion applied already: nothing changes"
		case s == Absent:
			return Refused, "released, deleted or never written: nothing to complete"
		default:
			return Refused, "another call's record: it must not be overwritten"
		}
	case Release:
		switch {
		case s == OwnInProgress || s == OwnLapsed || s == OwnHeld:
			return Applies, "the caller's own reservation, not taken over"
		case s == Absent:
			return Done, "nothing to delete: an earlier attempt, or the store, deleted it"
		case s.Own():
			return Refused, "completed: a release applied late must not delete the result"
		default:
			return Refused, "another call's record: it must not be deleted"
		}
	case WriteStep:
		// Reserve's condition: liveness only. The step's record is
		// completed when it is written, so it is live until its expiry.
		switch {
		case s == Absent:
			return Applies, "the step's key is free"
		case s == OwnCompleted:
			return Conflict, "the caller's own step, written by an attempt whose reply was lost: the conflict returns it"
		case s.Live():
			return Conflict, "a live record holds the step's key: the first result written wins, and the caller takes it"
		default:
			return Applies, "the record expired, or lapsed"
		}
	}
	panic(fmt.Sprintf("protocol: no rule for write %d", w))
}

// ident turns a name into an upper-case identifier.
func ident(name string) string {
	return strings.ToUpper(strings.NewReplacer(" ", "_", "-", "_").Replace(name))
}
