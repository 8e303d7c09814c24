package linearize

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/retrysafe/retrysafe/internal/protocol"
	"github.com/retrysafe/retrysafe/persistence"
)

// get is the read of the Store interface, which the table does not list:
// it changes nothing.
const get protocol.Write = -1

// input is one store call as the checker sees it.
type input struct {
	Key   string
	Write protocol.Write // or get
	Token string         // the writer's token
	Rec   record         // the record sent (reserve, renew, complete, record an error)
	Now   time.Time      // the caller's time (reserve)
	// Until is the latest time the call can have reached the store at,
	// by any caller's clock. It is the return plus skew, or never when
	// the outcome is unknown. A store may delete a record that expired
	// before then.
	Until time.Time
	// Attempt marks an earlier attempt of a write (see attempts).
	Attempt bool
}

// skew is how far ahead of true time a caller's clock may be in a
// [Workload]. A store that deletes expired records by its callers' clocks
// (the memory store sweeps at a reservation's time) may delete a record
// that much early.
const skew = 150 * time.Millisecond

// outcome is what a call returned.
type outcome int

const (
	unknown  outcome = iota // an error that does not say what happened
	ok                      // nil
	conflict                // a *persistence.ConflictError
	fenced                  // persistence.ErrFenced
	notFound                // persistence.ErrNotFound
)

var outcomeNames = [...]string{unknown: "unknown", ok: "ok", conflict: "conflict", fenced: "fenced", notFound: "not found"}

// output is a call's outcome and the record it returned: a Get's, or a
// conflict's existing record.
type output struct {
	Outcome outcome
	Rec     *record
}

// outputOf classifies a call's error.
func outputOf(err error) output {
	var c *persistence.ConflictError
	switch {
	case err == nil:
		return output{Outcome: ok}
	case errors.As(err, &c):
		o := output{Outcome: conflict}
		if c.Existing != nil {
			r := recordOf(c.Existing)
			o.Rec = &r
		}
		return o
	case errors.Is(err, persistence.ErrFenced):
		return output{Outcome: fenced}
	case errors.Is(err, persistence.ErrNotFound):
		return output{Outcome: notFound}
	}
	return output{Outcome: unknown}
}

// record is a persistence.Record at the precision every store keeps:
// the expiry in seconds, the in-progress expiry in milliseconds. It is
// comparable, so that Porcupine can compare and cache states.
type record struct {
	Status      persistence.Status
	Token       string
	Expires     int64 // epoch seconds
	Until       int64 // epoch milliseconds; 0: none
	Held        bool
	PayloadHash string
	Response    string
	Omitted     bool
	ErrorType   string
	ErrorMsg    string
}

func recordOf(r *persistence.Record) record {
	// Held matters only while the record is in progress: some stores
	// keep it on a completion, others drop it.
	held := r.Held && r.Status == persistence.StatusInProgress
	var until int64
	if !r.InProgressExpiresAt.IsZero() {
		until = r.InProgressExpiresAt.UnixMilli()
	}
	return record{
		Status: r.Status, Token: r.Token, Expires: r.ExpiresAt.Unix(), Until: until, Held: held,
		PayloadHash: r.PayloadHash, Response: string(r.Response), Omitted: r.ResponseOmitted,
		ErrorType: r.ErrorType, ErrorMsg: r.ErrorMessage,
	}
}

// persistent returns r as a persistence.Record, for its liveness methods.
func (r record) persistent() *persistence.Record {
	p := &persistence.Record{Status: r.Status, Token: r.Token, ExpiresAt: time.Unix(r.Expires, 0), Held: r.Held}
	if r.Until != 0 {
		p.InProgressExpiresAt = time.UnixMilli(r.Until)
	}
	return p
}

// state is the record of one key; the zero state is no record.
type state struct {
	Present bool
	Rec     record
}

// stateOf returns the protocol's state of s for a writer with token at
// now: the row of the table a write from that writer finds.
func stateOf(s state, token string, now time.Time) protocol.State {
	if !s.Present {
		return protocol.Absent
	}
	r := s.Rec.persistent()
	own := r.Token == token
	pick := func(mine, other protocol.State) protocol.State {
		if own {
			return mine
		}
		return other
	}
	switch {
	case r.Status == persistence.StatusCompleted && r.ExpiresAt.Before(now):
		return pick(protocol.OwnExpired, protocol.OtherExpired)
	case r.Status == persistence.StatusCompleted:
		return pick(protocol.OwnCompleted, protocol.OtherCompleted)
	case r.ExpiresAt.Before(now):
		// An in-progress record past its expiry holds nothing: lapsed.
		return pick(protocol.OwnLapsed, protocol.OtherLapsed)
	case r.Held && r.Lapsed(now):
		return pick(protocol.OwnHeld, protocol.OtherHeld)
	case r.Lapsed(now):
		return pick(protocol.OwnLapsed, protocol.OtherLapsed)
	}
	return pick(protocol.OwnInProgress, protocol.OtherInProgress)
}

// apply returns the outcome the table gives in for s, and the state it
// leaves. The table says whether the write applies; apply says only what
// applying writes.
func apply(s state, in input) (outcome, state) {
	if in.Write == get {
		if !s.Present {
			return notFound, s
		}
		return ok, s
	}
	switch protocol.Lookup(in.Write, stateOf(s, in.Token, in.Now)) {
	case protocol.Conflict:
		return conflict, s
	case protocol.Refused:
		return fenced, s
	case protocol.Done:
		return ok, s
	}
	switch in.Write {
	case protocol.Release:
		return ok, state{}
	case protocol.Renew:
		// The in-progress expiry becomes the later of the two: an
		// earlier renewal that arrives late changes nothing.
		if s.Present && s.Rec.Until > in.Rec.Until {
			return ok, s
		}
	}
	return ok, state{Present: true, Rec: in.Rec}
}

// step returns the states the call in, having returned out, can leave
// s in; none when out is not a result the table allows. The store may
// delete an expired record at any time before the call.
func step(s state, in input, out output) []state {
	starts := []state{s}
	if s.Present && time.Unix(s.Rec.Expires, 0).Before(in.Until) {
		starts = append(starts, state{})
	}
	var next []state
	for _, s := range starts {
		if got, after := apply(s, in); allowed(got, after, s, out) {
			next = append(next, after)
		}
	}
	return next
}

// allowed reports whether out is the reply of a call that had outcome
// got on a record in state before.
func allowed(got outcome, after, before state, out output) bool {
	switch {
	case out.Outcome == unknown:
		return true
	case out.Outcome != got:
		return false
	case got == ok && out.Rec != nil:
		return after.Present && *out.Rec == after.Rec
	case got == conflict && out.Rec != nil:
		return before.Present && *out.Rec == before.Rec
	}
	return true
}

// model is the Porcupine model of one key's record. Porcupine looks for
// a sequential order of the calls, each within its interval. In it every
// reply must be what the table gives.
var model = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{state{}} },
	Step: func(s, in, out any) []any {
		var next []any
		for _, n := range step(s.(state), in.(input), out.(output)) {
			next = append(next, n)
		}
		return next
	},
	DescribeOperation: func(in, out any) string { return describe(in.(input), out.(output)) },
	DescribeState: func(s any) string {
		st := s.(state)
		if !st.Present {
			return "absent"
		}
		return st.Rec.String()
	},
}).ToModel()

// describe writes a call and its reply in one line.
func describe(in input, out output) string {
	var b strings.Builder
	if in.Write == get {
		b.WriteString("get")
	} else {
		fmt.Fprintf(&b, "%s by %s", in.Write, short(in.Token))
	}
	switch in.Write {
	case protocol.Reserve:
		fmt.Fprintf(&b, " at %s: %s", millis(in.Now.UnixMilli()), in.Rec)
	case protocol.Renew, protocol.Complete, protocol.RecordError:
		fmt.Fprintf(&b, ": %s", in.Rec)
	}
	if in.Attempt {
		b.WriteString(" (an earlier attempt)")
	}
	fmt.Fprintf(&b, " -> %s", outcomeNames[out.Outcome])
	if out.Rec != nil {
		fmt.Fprintf(&b, " %s", out.Rec)
	}
	return b.String()
}

// String writes the record briefly: status, token, expiries.
func (r record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{%s %s expires %d", r.Status, short(r.Token), r.Expires%1000)
	if r.Until != 0 {
		fmt.Fprintf(&b, " until %s", millis(r.Until))
	}
	if r.Held {
		b.WriteString(" held")
	}
	if r.Response != "" {
		fmt.Fprintf(&b, " %q", r.Response)
	}
	if r.ErrorType != "" {
		fmt.Fprintf(&b, " error %s", r.ErrorType)
	}
	b.WriteString("}")
	return b.String()
}

// millis writes an epoch time in milliseconds as seconds within the
// minute, which is all a history spans.
func millis(ms int64) string { return fmt.Sprintf("%d.%03d", ms/1000%1000, ms%1000) }

// short is a token's first characters.
func short(token string) string {
	if len(token) > 6 {
		return token[:6]
	}
	return token
}
