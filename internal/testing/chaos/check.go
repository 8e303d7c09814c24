package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
)

// The checks, as violations name them.
const (
	// checkAtMostOnce: two side effects of one key both had their result
	// stored, with no data loss and no expiry between them.
	checkAtMostOnce = "at_most_once"
	// checkExplained: a side effect beyond the first that no documented
	// limit explains (an earlier side effect whose result was not stored, or
	// a loss of the store's data, or the key's expiry).
	checkExplained = "unexplained_side_effect"
	// checkExclusion: an invocation reserved the key more than the skew
	// bound before another's reservation lapsed, and that reservation had
	// been neither released nor replaced.
	checkExclusion = "mutual_exclusion"
	// checkReservation: the handler ran without a reservation, or a result
	// was stored for an invocation without a side effect.
	checkReservation = "reservation"
	// checkAnswer: a client got an answer that no side effect of the key
	// produced (a fabricated or corrupted replay), or ResponseTooLarge for a
	// key whose response was never omitted.
	checkAnswer = "answer_source"
	// checkConsistency: after a key's result was stored, a client got
	// another answer (without data loss in between).
	checkConsistency = "answer_consistency"
	// checkBlocking: a client was told the key is in progress by a
	// reservation that had lapsed (by more than the skew bound), or that no
	// invocation wrote.
	checkBlocking = "blocking"
	// checkLiveness: a client retrying its key got no final answer.
	checkLiveness = "liveness"
	// checkContract: the library lost the context's values, or used two
	// store keys for one request.
	checkContract = "contract"
	// checkExactlyOnce, in transactional mode: a side effect that
	// committed repeats an earlier one for any reason but the key's expiry
	// or a loss of the store's data, or committed although its
	// invocation's commit was fenced out or canceled.
	checkExactlyOnce = "exactly_once"
	// checkUnexpected: an outcome the library does not document (an
	// unexpected error type, a panic that is not the handler's).
	checkUnexpected = "unexpected_outcome"
	// checkReopened: a renewal that reached the store after its own
	// invocation's completion had been stored applied: it made the
	// completed record in progress again (docs/protocol.md: a renewal of
	// an own completed record is refused), so that once it lapses a call
	// can take the key over and run the handler again.
	checkReopened = "reopened"
)

// Violation is a breach of the invariant.
type Violation struct {
	Key    string // the client's key
	Check  string
	Detail string
}

// String implements fmt.Stringer.
func (v Violation) String() string { return v.Key + ": " + v.Check + ": " + v.Detail }

func violation(key, check, format string, args ...any) Violation {
	return Violation{Key: key, Check: check, Detail: fmt.Sprintf(format, args...)}
}

// storeRounding is the precision with which stores keep in-progress
// expiries (milliseconds; the Redis store truncates, DynamoDB rounds up).
const storeRounding = time.Millisecond

// verdict is what the checker found for one key.
type verdict struct {
	violations []Violation
	effects    int
	// explained counts the side effects beyond the first, by the limit that
	// explains each: "<cause of the earlier exposed effect>" or "data_loss"
	// or "expiry".
	explained map[string]int
	// exposed counts the side effects whose result was not stored, by cause.
	exposed map[string]int
	// answersChanged is set when one client saw two different final answers
	// for the key (each explained, or a violation).
	answersChanged bool
	// pastExpiry is the longest a client was told the key is in progress
	// after the blocking reservation's in-progress expiry (at most the skew
	// bound plus the store's rounding).
	pastExpiry time.Duration
	// blockedByUnused counts the in-progress answers caused by a
	// reservation whose invocation never ran the handler: a write applied
	// with its reply lost, which the library could not release.
	blockedByUnused int
	final           bool
}

// reservation is an invocation that held the key: the library let its
// handler run.
type reservation struct {
	inv       *invRecord
	put       storeCall    // the Put that acquired the key
	renewals  []*storeCall // the renewals that applied
	update    *storeCall   // the last completion write, or the one applied late
	released  *storeCall   // the first release that may have been applied, if any
	effect    *effect
	completed bool // the completion write succeeded (possibly without the response)
	omitted   bool
}

// until returns the in-progress expiry that the reservation's record
// certainly had at t: its Put's, or that of the last renewal that had
// applied by then. A renewal still under way at t is left out: a takeover
// is judged against the earliest expiry the record may have had.
func (r *reservation) until(t time.Time) time.Time {
	u := r.put.InProgressUntil
	for _, c := range r.renewals {
		if c.End.Before(t) && c.InProgressUntil.After(u) {
			u = c.InProgressUntil
		}
	}
	return u
}

// applied reports whether a call's result says its write took effect.
func applied(r result) bool { return r == resultOK || r == resultOmitted }

// checkKey checks the log of one key. losses are the times at which the
// store lost its data; skew is the run's clock skew bound. In
// transactional mode (tx), the staged side effects of the log have been
// marked Committed from the store: those that did not commit never
// happened, and error answers are decisions, not side effects.
func checkKey(k *keyLog, losses []time.Time, skew time.Duration, tx bool) verdict {
	k.mu.Lock()
	defer k.mu.Unlock()
	// logged are the side effects that happened, and the decisions.
	logged := k.effects
	if tx {
		logged = nil
		for _, e := range k.effects {
			if !e.Staged || e.Committed {
				logged = append(logged, e)
			}
		}
	}
	isSideEffect := func(e *effect) bool { return !tx || e.Staged }
	v := verdict{
		violations: append([]Violation(nil), k.violations...),
		explained:  map[string]int{},
		exposed:    map[string]int{},
		final:      k.final,
	}
	for i := range logged {
		if isSideEffect(&logged[i]) {
			v.effects++
		}
	}
	fail := func(check, format string, args ...any) {
		v.violations = append(v.violations, violation(k.name, check, format, args...))
	}
	lossBetween := func(from, to time.Time) bool {
		for _, t := range losses {
			if t.After(from) && t.Before(to) {
				return true
			}
		}
		return false
	}

	effects := map[string]*effect{}
	for i := range logged {
		e := &logged[i]
		if effects[e.Inv] != nil {
			fail(checkReservation, "invocation %s logged two side effects", e.Inv)
		}
		effects[e.Inv] = e
	}
	calls := map[string][]storeCall{}
	for _, c := range k.calls {
		calls[c.Inv] = append(calls[c.Inv], c)
	}

	// Reservations: the invocations whose handler ran.
	var res []*reservation
	for _, inv := range k.invs {
		var put, update, lateDone, released *storeCall
		var renewals []*storeCall
		for i := range calls[inv.ID] {
			c := &calls[inv.ID][i]
			switch c.Op {
			case faultstore.OpPut:
				if !c.Late && !inv.HandlerStart.IsZero() && c.Start.Before(inv.HandlerStart) {
					put = c
				}
			case faultstore.OpUpdate, faultstore.OpCommit:
				switch {
				case c.Renewal:
					if applied(c.Result) {
						renewals = append(renewals, c)
					}
				case c.Late:
					// A completion held back that applied late completed
					// the record then.
					if applied(c.Result) {
						lateDone = c
					}
				default:
					update = c
				}
			case faultstore.OpDelete:
				// Any release may have been applied: one that failed lost
				// its reply, and one that was fenced may be the store
				// client's retry of an attempt that deleted the record, a
				// retry that found the record of the invocation that took
				// the key over since. One held back applied, if at all,
				// when its late write did, and only a late write that
				// the store did not refuse may have deleted the record.
				mayHave := c.Result != resultHeld && (!c.Late || c.Result == resultOK || c.Result == resultFailed)
				if mayHave && (released == nil || c.Start.Before(released.Start)) {
					released = c
				}
			}
		}
		if lateDone != nil && (update == nil || !applied(update.Result)) {
			update = lateDone
		}
		e := effects[inv.ID]
		switch {
		case update == nil || e != nil:
		case !tx:
			fail(checkReservation, "invocation %s wrote a completion (%s) without a side effect", inv.ID, update.Result)
		case update.Result == resultOK || update.Result == resultOmitted:
			// A commit that failed, was fenced or canceled wrote nothing
			// (or, failed, may have written it); one that succeeded wrote
			// its side effect.
			fail(checkExactlyOnce, "invocation %s committed its completion, but not its staged side effect", inv.ID)
		}
		if tx && e != nil && e.Staged {
			mayHave := false
			for _, c := range calls[inv.ID] {
				if c.Op == faultstore.OpCommit && (c.Result == resultOK || c.Result == resultOmitted || c.Result == resultFailed) {
					mayHave = true
				}
			}
			if !mayHave {
				fail(checkExactlyOnce, "the side effect of invocation %s committed, but none of its commits may have", inv.ID)
			}
		}
		if inv.HandlerStart.IsZero() {
			if e != nil {
				fail(checkReservation, "invocation %s has a side effect but its handler never started", inv.ID)
			}
			continue
		}
		if put == nil {
			fail(checkReservation, "invocation %s: the handler ran without a reservation (no Put before it)", inv.ID)
			continue
		}
		r := &reservation{inv: inv, put: *put, renewals: renewals, update: update, released: released, effect: e}
		if update != nil {
			r.completed = applied(update.Result)
			r.omitted = update.Result == resultOmitted
		}
		res = append(res, r)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].put.End.Before(res[j].put.End) })

	// Mutual exclusion: each reservation took the key from the one before
	// it legitimately: that one had lapsed (by a clock within the skew
	// bound), had sent a release that may have been applied, or was
	// replaced by a write that found it lapsed; or the store lost it.
	justified := func(a, b *reservation) bool {
		if a.completed {
			return lossBetween(a.update.Start, b.put.End) || b.put.Now.After(a.update.ExpiresAt)
		}
		// a had lapsed by some clock within the skew bound when b's write
		// landed: b's own (b.put.Now), or that of another writer whose
		// write removed a's record (the memory store sweeps lapsed records
		// by the clock of the writer that triggers the sweep; Redis expires
		// keys by its own clock). Renewals that had applied moved a's
		// in-progress expiry.
		if b.put.End.Add(skew + storeRounding).After(a.until(b.put.Start)) {
			return true
		}
		if a.released != nil && !a.released.Start.After(b.put.End) {
			return true
		}
		if lossBetween(a.put.Start, b.put.End) {
			return true
		}
		// A Put that was held back did not reach the store during its
		// call; its late write, a call of its own, may have.
		for _, c := range k.calls {
			if c.Op == faultstore.OpPut && c.Inv != a.inv.ID && c.Inv != b.inv.ID &&
				(c.Result == resultOK || c.Result == resultFailed) &&
				c.Now.Add(storeRounding).After(a.until(c.Start)) &&
				!c.Start.After(b.put.End) && !c.End.Before(a.put.Start) {
				return true
			}
		}
		return false
	}
	for i := 1; i < len(res); i++ {
		a, b := res[i-1], res[i]
		if justified(a, b) {
			continue
		}
		if b.put.Start.Before(a.put.End) && justified(b, a) {
			continue // the calls overlapped, and b's write may have landed first
		}
		state := "in progress until " + a.until(b.put.Start).Format(timeFormat)
		if a.completed {
			state = "completed"
		}
		fail(checkExclusion, "invocation %s reserved the key at %s (true time; %s by its clock) while invocation %s held it (%s)",
			b.inv.ID, b.put.End.Format(timeFormat), b.put.Now.Format(timeFormat), a.inv.ID, state)
	}

	// At most once: two stored results of one key.
	var completed []*reservation
	for _, r := range res {
		if r.completed && r.effect != nil {
			completed = append(completed, r)
		}
	}
	sort.Slice(completed, func(i, j int) bool { return completed[i].update.End.Before(completed[j].update.End) })
	for i := 1; i < len(completed); i++ {
		a, b := completed[i-1], completed[i]
		if !lossBetween(a.update.Start, b.put.End) && !b.put.Now.After(a.update.ExpiresAt) {
			fail(checkAtMostOnce, "the results of invocations %s and %s were both stored", a.inv.ID, b.inv.ID)
		}
	}

	// Reopened: a renewal that applied after its own completion had been
	// stored. The protocol refuses it whatever else happened (a lost
	// record is absent, and another call's record is not its own), so
	// nothing excuses it.
	for _, r := range res {
		if !r.completed {
			continue
		}
		for _, c := range calls[r.inv.ID] {
			if c.Renewal && applied(c.Result) && c.Start.After(r.update.End) {
				late := ""
				if c.Late {
					late = " (held back " + c.heldWhere() + ", applied late)"
				}
				fail(checkReopened, "a renewal of invocation %s%s applied at %s, after its completion was stored at %s: the completed record was made in progress again, until %s",
					r.inv.ID, late, c.Start.Format(timeFormat), r.update.End.Format(timeFormat), c.InProgressUntil.Format(timeFormat))
			}
		}
	}

	// Every side effect beyond the first is explained by a distinct earlier
	// one whose result was not stored (the documented limits), or by a loss
	// of the store's data or the key's expiry after an earlier one.
	//
	// Earlier is by reservation, in the order their Puts ended, except that
	// a reservation whose result was not stored goes before a stored one
	// whose Put ended after its own began: its Put may have applied first
	// (a slow Put whose reply came after its lease ended, when the other
	// had taken the lapsed key over), and a key whose result is stored
	// takes no reservation before its expiry.
	var byPut []*reservation
	for _, r := range res {
		if r.effect != nil && isSideEffect(r.effect) {
			byPut = append(byPut, r)
			if !r.completed {
				v.exposed[exposure(r)]++
			}
		}
	}
	var withEffect []*reservation
	placed := map[*reservation]bool{}
	for i, r := range byPut {
		if r.completed {
			for _, u := range byPut[i+1:] {
				if !u.completed && !placed[u] && u.put.Start.Before(r.put.End) {
					withEffect = append(withEffect, u)
					placed[u] = true
				}
			}
		}
		if !placed[r] {
			withEffect = append(withEffect, r)
			placed[r] = true
		}
	}
	used := make([]bool, len(withEffect))
	for j := 1; j < len(withEffect); j++ {
		b := withEffect[j]
		why := ""
		for i := 0; i < j && why == ""; i++ {
			a := withEffect[i]
			if used[i] {
				continue
			}
			switch {
			case !a.completed:
				why = exposure(a)
			case lossBetween(a.put.Start, b.put.End):
				why = "data_loss"
			case b.put.Now.After(a.update.ExpiresAt):
				why = "expiry"
			}
			if why != "" {
				used[i] = true
			}
		}
		if why == "" {
			fail(checkExplained, "side effect of invocation %s repeats an earlier one and no limit explains it", b.inv.ID)
			continue
		}
		if tx && why != "data_loss" && why != "expiry" {
			fail(checkExactlyOnce, "side effect of invocation %s repeats an earlier one (%s), which a transaction rules out", b.inv.ID, why)
		}
		v.explained[why]++
	}

	// Answers: each final answer is one that a side effect of the key
	// produced; once a result is stored, every later answer is that result.
	// A completion write that failed may have been applied, its reply lost
	// (or its deadline passed while the store applied it).
	omitted := false
	for _, c := range k.calls {
		if (c.Op == faultstore.OpUpdate || c.Op == faultstore.OpCommit) && !c.Renewal &&
			(c.Result == resultOmitted || c.Result == resultFailed && k.req.Large) {
			omitted = true
		}
	}
	var seen []string
	for _, r := range k.replies {
		if !r.Final {
			continue
		}
		if !r.Dup && (len(seen) == 0 || seen[len(seen)-1] != r.Answer) {
			seen = append(seen, r.Answer)
		}
		if r.Answer == AnswerTooLarge {
			if !omitted {
				fail(checkAnswer, "invocation %s answered %s, but no response of the key was omitted", r.Inv, AnswerTooLarge)
			}
			continue
		}
		found := false
		for _, e := range logged {
			if e.Answer == r.Answer {
				found = true
				break
			}
		}
		if !found {
			fail(checkAnswer, "invocation %s answered %q, which no side effect of the key produced", r.Inv, r.Answer)
		}
	}
	v.answersChanged = len(seen) > 1
	stored := func(r *reservation) string {
		if r.omitted {
			return AnswerTooLarge
		}
		return r.effect.Answer
	}
	for _, p := range completed {
		want := stored(p)
		// Results stored before a loss of the store's data may still be
		// replayed from a local cache.
		older := map[string]bool{}
		for _, q := range completed {
			if q != p && lossBetween(q.update.Start, p.update.End) {
				older[stored(q)] = true
			}
		}
		for _, r := range k.replies {
			if r.Final && r.Start.After(p.update.End) && !lossBetween(p.update.Start, r.End) && r.Answer != want && !older[r.Answer] {
				fail(checkConsistency, "invocation %s answered %q after invocation %s stored %q", r.Inv, r.Answer, p.inv.ID, want)
			}
		}
	}

	// Blocking: an in-progress answer comes from a reservation somebody
	// wrote, and that had not lapsed by the reader's clock.
	handlerRan := map[string]bool{}
	for _, inv := range k.invs {
		handlerRan[inv.ID] = !inv.HandlerStart.IsZero()
	}
	for _, r := range k.replies {
		if r.Reason != RetryInProgress {
			continue
		}
		if r.Until.IsZero() {
			continue // the client is not told (HTTP: a Retry-After in seconds)
		}
		past := r.Start.Sub(r.Until)
		v.pastExpiry = max(v.pastExpiry, past)
		if past > skew+storeRounding {
			fail(checkBlocking, "invocation %s was told the key is in progress %v after the reservation lapsed (skew bound %v)", r.Inv, past, skew)
		}
		// Any Put may have written it: one that failed may have been
		// applied, and one that conflicted may have been retried by the
		// store client after its first attempt was applied; so may any
		// renewal.
		written, ran := false, false
		for _, c := range k.calls {
			if c.Op == faultstore.OpPut || c.Renewal {
				if d := r.Until.Sub(c.InProgressUntil); d > -storeRounding && d < storeRounding {
					written = true
					ran = ran || handlerRan[c.Inv]
				}
			}
		}
		if written && !ran {
			v.blockedByUnused++
		}
		if !written {
			fail(checkBlocking, "invocation %s was told the key is in progress until %s, which no reservation wrote", r.Inv, r.Until.Format(timeFormat))
		}
	}
	return v
}

// exposure names why a side effect's result was not stored.
func exposure(r *reservation) string {
	switch {
	case r.inv.KilledAfterEffect:
		return "killed_after_side_effect"
	case r.update == nil:
		return "no_completion_write"
	case r.update.Result == resultFenced:
		return "completion_fenced"
	}
	return "completion_failed"
}

const timeFormat = "15:04:05.000000"

// timeline formats the log of k, in time order, for the report of a key
// with violations.
func timeline(k *keyLog, losses []time.Time) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	add := func(at time.Time, format string, args ...any) {
		lines = append(lines, line{at, fmt.Sprintf(format, args...)})
	}
	for _, inv := range k.invs {
		lease := ""
		if inv.Lease > 0 {
			lease = fmt.Sprintf(", lease %v", inv.Lease)
		}
		add(inv.Start, "%s starts in env %d (skew %v%s), deadline %s, dup=%v", inv.ID, inv.Env, inv.Skew, lease, inv.Deadline.Format(timeFormat), inv.Dup)
		if !inv.HandlerStart.IsZero() {
			add(inv.HandlerStart, "%s handler starts", inv.ID)
		}
		if inv.Killed {
			add(inv.Deadline, "%s was killed (after side effect: %v)", inv.ID, inv.KilledAfterEffect)
		}
		if inv.Abandoned {
			add(inv.Deadline, "%s abandoned by its client; late outcome: %s", inv.ID, inv.Late)
		}
	}
	for _, e := range k.effects {
		what := "SIDE EFFECT"
		switch {
		case e.Staged && e.Committed:
			what = "SIDE EFFECT STAGED (committed)"
		case e.Staged:
			what = "SIDE EFFECT STAGED (not committed)"
		}
		add(e.At, "%s %s (answer %q, after deadline: %v)", e.Inv, what, e.Answer, e.AfterDeadline)
	}
	for _, c := range k.calls {
		op := c.opName()
		if c.Late {
			op = "LATE " + op + " (held back " + c.heldWhere() + ", applied now)"
		}
		text := fmt.Sprintf("%s %s -> %s (ended %s)", c.Inv, op, c.Result, c.End.Format(timeFormat))
		switch {
		case c.Op == faultstore.OpPut:
			text += fmt.Sprintf(" now=%s in_progress_until=%s token=%.8s", c.Now.Format(timeFormat), c.InProgressUntil.Format(timeFormat), c.Token)
		case c.Renewal:
			text += fmt.Sprintf(" in_progress_until=%s token=%.8s", c.InProgressUntil.Format(timeFormat), c.Token)
		case c.Op == faultstore.OpUpdate, c.Op == faultstore.OpCommit, c.Op == faultstore.OpDelete:
			text += fmt.Sprintf(" token=%.8s", c.Token)
		}
		if c.OtherToken != "" {
			text += fmt.Sprintf(" found token=%.8s", c.OtherToken)
		}
		add(c.Start, "%s", text)
	}
	for _, r := range k.replies {
		if r.Final {
			add(r.End, "%s client gets %q", r.Inv, r.Answer)
		} else {
			add(r.End, "%s client gets %s (until %s)", r.Inv, r.Reason, r.Until.Format(timeFormat))
		}
	}
	for _, t := range losses {
		add(t, "STORE LOSES ITS DATA")
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "    %s %s\n", l.at.Format(timeFormat), l.text)
	}
	return b.String()
}
