package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
)

// Synthetic logs, in milliseconds from t0, for each check and for the
// documented limits it must accept.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

const testSkew = 10 * time.Millisecond

// logBuilder builds a keyLog.
type logBuilder struct{ k *keyLog }

func newLog() *logBuilder {
	return &logBuilder{k: &keyLog{name: "k", req: Request{Key: "k"}, storeKey: "p#k", final: true}}
}

// reserve adds an invocation that reserved the key with a Put over
// [at, at+1] (its clock reading at), holding it until until, and whose
// handler started at at+2.
func (b *logBuilder) reserve(id string, at, until int) *invRecord {
	inv := &invRecord{ID: id, Start: ms(at), Deadline: ms(until), HandlerStart: ms(at + 2)}
	b.k.invs = append(b.k.invs, inv)
	b.k.calls = append(b.k.calls, storeCall{Inv: id, Op: faultstore.OpPut, Token: id,
		Now: ms(at), InProgressUntil: ms(until), ExpiresAt: ms(at).Add(time.Hour), Start: ms(at), End: ms(at + 1), Result: resultOK})
	return inv
}

// complete adds an invocation that reserved the key as reserve does,
// performed its side effect at at+5 and wrote its completion over
// [at+6, at+7] with result r.
func (b *logBuilder) complete(id string, at, until int, r result) {
	b.reserve(id, at, until)
	b.effect(id, at+5)
	b.update(id, at+6, r)
}

func (b *logBuilder) effect(id string, at int) {
	b.k.effects = append(b.k.effects, effect{Inv: id, At: ms(at), Answer: "ok " + id})
}

func (b *logBuilder) update(id string, at int, r result) {
	b.k.calls = append(b.k.calls, storeCall{Inv: id, Op: faultstore.OpUpdate, Token: id,
		ExpiresAt: ms(at).Add(time.Hour), Start: ms(at), End: ms(at + 1), Result: r})
}

// commit adds an invocation that reserved the key as reserve does, staged
// its side effect at at+5, committed or not (committed), and committed its
// completion over [at+6, at+7] with result r.
func (b *logBuilder) commit(id string, at, until int, committed bool, r result) {
	b.reserve(id, at, until)
	b.k.effects = append(b.k.effects, effect{Inv: id, At: ms(at + 5), Answer: "ok " + id, Staged: true, Committed: committed})
	b.k.calls = append(b.k.calls, storeCall{Inv: id, Op: faultstore.OpCommit, Token: id,
		ExpiresAt: ms(at + 6).Add(time.Hour), Start: ms(at + 6), End: ms(at + 7), Result: r})
}

// renew adds a renewal by id over [at, at+1] to until, with result r;
// late makes it a write held back, which applied then.
func (b *logBuilder) renew(id string, at, until int, r result, late bool) {
	b.k.calls = append(b.k.calls, storeCall{Inv: id, Op: faultstore.OpUpdate, Token: id, Renewal: true, Late: late,
		InProgressUntil: ms(until), ExpiresAt: ms(at).Add(time.Hour), Start: ms(at), End: ms(at + 1), Result: r})
}

// late adds the late write of id's completion, applied over [at, at+1]
// with result r.
func (b *logBuilder) late(id string, op faultstore.Op, at int, r result) {
	b.k.calls = append(b.k.calls, storeCall{Inv: id, Op: op, Token: id, Late: true,
		ExpiresAt: ms(at).Add(time.Hour), Start: ms(at), End: ms(at + 1), Result: r})
}

func (b *logBuilder) final(id string, at int, answer string) {
	b.k.replies = append(b.k.replies, reply{Inv: id, Start: ms(at), End: ms(at + 1), Final: true, Answer: answer})
}

func (b *logBuilder) inProgress(id string, at, until int) {
	b.k.replies = append(b.k.replies, reply{Inv: id, Start: ms(at), End: ms(at + 1), Reason: RetryInProgress, Until: ms(until)})
}

func checks(v verdict) []string {
	var out []string
	for _, x := range v.violations {
		out = append(out, x.Check)
	}
	return out
}

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		build     func(b *logBuilder)
		losses    []time.Time
		want      []string
		explained map[string]int
		tx        bool // transactional mode
	}{{
		name: "exactly once",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 250, resultOK)
			b.final("i1", 0, "ok i1")
			b.final("i2", 20, "ok i1")
		},
	}, {
		name: "a kill after the side effect allows one repetition after the in-progress expiry",
		build: func(b *logBuilder) {
			i1 := b.reserve("i1", 0, 100)
			b.effect("i1", 5)
			i1.Killed, i1.KilledAfterEffect = true, true
			b.inProgress("i2", 20, 100)
			b.complete("i3", 105, 400, resultOK)
			b.final("i3", 105, "ok i3")
		},
		explained: map[string]int{"killed_after_side_effect": 1},
	}, {
		name: "a failed completion allows one repetition, and a changed answer",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultFailed)
			b.final("i1", 0, "ok i1")
			b.complete("i2", 101, 400, resultOK)
			b.final("i2", 101, "ok i2")
			b.final("i3", 200, "ok i2")
		},
		explained: map[string]int{"completion_failed": 1},
	}, {
		name: "a reservation taken over before its expiry (beyond the skew bound)",
		build: func(b *logBuilder) {
			i1 := b.reserve("i1", 0, 100)
			b.effect("i1", 5)
			i1.Killed, i1.KilledAfterEffect = true, true
			b.complete("i2", 50, 300, resultOK)
		},
		want:      []string{checkExclusion},
		explained: map[string]int{"killed_after_side_effect": 1},
	}, {
		name: "a takeover within the skew bound of the expiry",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.reserve("i2", 90, 300) // ends at 91; 91 + 10 + 1 > 100
		},
	}, {
		name: "a takeover after a release",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.k.calls = append(b.k.calls, storeCall{Inv: "i1", Op: faultstore.OpDelete, Token: "i1", Start: ms(10), End: ms(11), Result: resultOK})
			b.reserve("i2", 20, 300)
		},
	}, {
		name: "a takeover after a release whose retry was fenced",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			// The first attempt deleted the record, its reply was lost, and
			// the retry found i2's record.
			b.k.calls = append(b.k.calls, storeCall{Inv: "i1", Op: faultstore.OpDelete, Token: "i1", Start: ms(10), End: ms(40), Result: resultFenced})
			b.reserve("i2", 20, 300)
		},
	}, {
		name: "a takeover without a release",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.reserve("i2", 20, 300)
			b.k.calls = append(b.k.calls, storeCall{Inv: "i1", Op: faultstore.OpDelete, Token: "i1", Start: ms(30), End: ms(31), Result: resultFenced})
		},
		want: []string{checkExclusion},
	}, {
		name: "two stored results",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultOK)
			b.complete("i2", 150, 400, resultOK)
		},
		want: []string{checkExclusion, checkAtMostOnce, checkExplained},
	}, {
		name: "two stored results with a loss of the store's data between them",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultOK)
			b.final("i1", 0, "ok i1")
			b.complete("i2", 150, 400, resultOK)
			b.final("i2", 150, "ok i2")
		},
		losses:    []time.Time{ms(120)},
		explained: map[string]int{"data_loss": 1},
	}, {
		name: "a local cache replays a result the store lost",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultOK)
			b.complete("i2", 150, 400, resultOK)
			b.final("i3", 200, "ok i2")
			b.final("i4", 210, "ok i1") // from the cache of another environment
		},
		losses:    []time.Time{ms(120)},
		explained: map[string]int{"data_loss": 1},
	}, {
		name: "a handler that ran without a reservation",
		build: func(b *logBuilder) {
			b.k.invs = append(b.k.invs, &invRecord{ID: "i1", HandlerStart: ms(2)})
			b.effect("i1", 3)
		},
		want: []string{checkReservation},
	}, {
		name: "an answer no side effect produced",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultOK)
			b.final("i2", 20, "ok i9")
			b.final("i3", 30, AnswerTooLarge)
		},
		want: []string{checkAnswer, checkConsistency, checkAnswer, checkConsistency},
	}, {
		name: "an answer other than the stored one",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultFailed)
			b.complete("i2", 101, 400, resultOK)
			b.final("i3", 200, "ok i1") // produced by i1, but i2's result is stored
		},
		want:      []string{checkConsistency},
		explained: map[string]int{"completion_failed": 1},
	}, {
		name: "a response too large to store",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultOmitted)
			b.final("i1", 0, "ok i1")
			b.final("i2", 20, AnswerTooLarge)
		},
	}, {
		name: "in progress long after the reservation lapsed",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.inProgress("i2", 50, 100)
			b.inProgress("i3", 111, 100) // 11 ms after: within bound and rounding
			b.inProgress("i4", 112, 100)
		},
		want: []string{checkBlocking},
	}, {
		name: "transactions: a kill before the commit leaves nothing, and the retry commits once",
		tx:   true,
		build: func(b *logBuilder) {
			i1 := b.reserve("i1", 0, 100)
			b.k.effects = append(b.k.effects, effect{Inv: "i1", At: ms(5), Answer: "ok i1", Staged: true})
			i1.Killed, i1.KilledAfterEffect = true, true
			b.commit("i2", 105, 400, true, resultOK)
			b.final("i2", 105, "ok i2")
		},
	}, {
		name: "transactions: a fenced commit writes nothing",
		tx:   true,
		build: func(b *logBuilder) {
			b.commit("i1", 0, 100, false, resultFenced)
			b.commit("i2", 105, 400, true, resultOK)
			b.final("i2", 105, "ok i2")
		},
	}, {
		name: "transactions: an answer from a side effect that did not commit",
		tx:   true,
		build: func(b *logBuilder) {
			b.commit("i1", 0, 100, false, resultCanceled)
			b.final("i1", 0, "ok i1")
		},
		want: []string{checkAnswer},
	}, {
		name: "transactions: two committed side effects are a violation, whatever explains the first",
		tx:   true,
		build: func(b *logBuilder) {
			b.commit("i1", 0, 100, true, resultFailed) // reply lost, and applied
			b.commit("i2", 101, 400, true, resultOK)
		},
		want:      []string{checkExactlyOnce},
		explained: map[string]int{"completion_failed": 1},
	}, {
		name: "transactions: a side effect committed by a fenced commit",
		tx:   true,
		build: func(b *logBuilder) {
			b.commit("i1", 0, 100, true, resultFenced)
		},
		want: []string{checkExactlyOnce},
	}, {
		name: "transactions: a commit that succeeded without its side effect",
		tx:   true,
		build: func(b *logBuilder) {
			b.commit("i1", 0, 100, false, resultOK)
		},
		want: []string{checkExactlyOnce},
	}, {
		name: "a renewal moves the in-progress expiry",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.renew("i1", 30, 130, resultOK, false)
			b.inProgress("i2", 110, 130) // the renewal wrote it
			b.reserve("i2", 125, 300)    // ends at 126; 126 + 10 + 1 > 130
		},
	}, {
		name: "a takeover before the renewed expiry",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.renew("i1", 30, 130, resultOK, false)
			b.renew("i1", 60, 160, resultFailed, false) // may not have applied
			b.reserve("i2", 110, 300)
		},
		want: []string{checkExclusion},
	}, {
		name: "a renewal held back moves nothing until it applies",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.renew("i1", 30, 130, resultHeld, false)
			b.reserve("i2", 101, 300)
			b.renew("i1", 150, 130, resultFenced, true)
		},
	}, {
		name: "a renewal applied late to its own lapsed reservation",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.renew("i1", 30, 130, resultHeld, false)
			b.renew("i1", 105, 130, resultOK, true)
			b.reserve("i2", 110, 300)
		},
		want: []string{checkExclusion},
	}, {
		name: "a renewal applied after its own completion reopens the key",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.renew("i1", 30, 130, resultHeld, false)
			b.effect("i1", 40)
			b.update("i1", 45, resultOK)
			b.final("i1", 0, "ok i1")
			b.renew("i1", 60, 130, resultOK, true)
			// The reopened record lapses; a retry takes the key over.
			b.complete("i2", 140, 400, resultOK)
			b.final("i2", 140, "ok i2")
		},
		want: []string{checkReopened, checkExclusion, checkAtMostOnce, checkExplained, checkConsistency},
	}, {
		name: "a renewal applied late, refused after the completion",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.renew("i1", 30, 130, resultHeld, false)
			b.effect("i1", 40)
			b.update("i1", 45, resultOK)
			b.final("i1", 0, "ok i1")
			b.renew("i1", 60, 130, resultFenced, true)
			b.final("i2", 140, "ok i1")
		},
	}, {
		name: "a completion held back completes the key when it applies",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultHeld)
			b.final("i1", 0, "ok i1")
			b.late("i1", faultstore.OpUpdate, 50, resultOK)
			b.final("i2", 60, "ok i1")
			b.final("i3", 200, "ok i9") // after the late completion: only i1's result
		},
		want: []string{checkAnswer, checkConsistency},
	}, {
		name: "a completion held back and refused leaves the side effect exposed",
		build: func(b *logBuilder) {
			b.complete("i1", 0, 100, resultHeld)
			b.complete("i2", 101, 400, resultOK)
			b.late("i1", faultstore.OpUpdate, 150, resultFenced)
			b.final("i2", 101, "ok i2")
		},
		explained: map[string]int{"completion_failed": 1},
	}, {
		name: "a release held back frees the key only when it applies",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.k.calls = append(b.k.calls, storeCall{Inv: "i1", Op: faultstore.OpDelete, Token: "i1", Start: ms(10), End: ms(11), Result: resultHeld})
			b.reserve("i2", 20, 300)
			b.late("i1", faultstore.OpDelete, 30, resultOK)
		},
		want: []string{checkExclusion},
	}, {
		name: "a slow reservation that applied first, lapsed before its reply, and was taken over",
		build: func(b *logBuilder) {
			// i1's Put applied at once and its reply came at 100, after its
			// lease ended at 30; i2 took the lapsed key over at 56.
			i1 := b.reserve("i1", 0, 30)
			b.k.calls[len(b.k.calls)-1].End = ms(100)
			i1.HandlerStart = ms(101)
			b.complete("i2", 55, 300, resultOK)
			b.effect("i1", 130)
			b.update("i1", 131, resultFenced)
			b.final("i2", 55, "ok i2")
		},
		explained: map[string]int{"completion_fenced": 1},
	}, {
		name: "in progress until a time no reservation wrote",
		build: func(b *logBuilder) {
			b.reserve("i1", 0, 100)
			b.inProgress("i2", 50, 150)
		},
		want: []string{checkBlocking},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newLog()
			tc.build(b)
			v := checkKey(b.k, tc.losses, testSkew, tc.tx)
			require.ElementsMatch(t, tc.want, checks(v), "violations: %v", v.violations)
			if tc.explained == nil {
				tc.explained = map[string]int{}
			}
			require.Equal(t, tc.explained, v.explained)
		})
	}
}
