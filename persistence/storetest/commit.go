package storetest

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/protocol"
	"github.com/retrysafe/retrysafe/persistence"
)

// A CommitHarness is what [RunCommit] needs of a store that commits staged
// writes (a [persistence.Committer]). It holds the store, and writes of
// its own kind whose effects the suite can count.
type CommitHarness struct {
	// NewStore returns the store under test; it is called once per
	// subtest, and may return one shared store.
	NewStore func(t *testing.T) persistence.Committer

	// Increment returns a write that adds one to the counter named name,
	// which starts at zero.
	Increment func(t *testing.T, name string) any

	// Failing returns a write whose own condition fails, so that a commit
	// holding it is canceled.
	Failing func(t *testing.T) any

	// Count returns the counter named name: how many committed
	// Increments of it there were.
	Count func(t *testing.T, name string) int
}

// RunCommit runs the conformance suite of persistence.Committer: what
// package idempotency's WithTransactions relies on. Subtests run in
// parallel, each with keys and counters of its own.
func RunCommit(t *testing.T, h CommitHarness) {
	t.Helper()
	for _, tc := range commitCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, h, h.NewStore(t))
		})
	}
	// docs/protocol.md's commit in every state: the staged writes apply
	// exactly when the completion does.
	for _, row := range protocol.Table {
		if row.Write != protocol.Commit {
			continue
		}
		t.Run(rowName(row), func(t *testing.T) {
			t.Parallel()
			s := h.NewStore(t)
			n := counter(t, "n")
			var applied bool
			checkRow(t, s, row, func(t *testing.T, key, mine string, prior *persistence.Record, now time.Time) (error, *persistence.Record) {
				rec := completion(protocol.Complete, key, mine, prior, now)
				err := s.Commit(ctx(t), rec, []any{h.Increment(t, n)})
				applied = err == nil && row.Outcome == protocol.Applies
				return err, rec
			})
			want := 0
			if applied {
				want = 1
			}
			checkCount(t, h, n, want, "a commit that "+row.Outcome.String()+" on a record in state "+row.State.String())
		})
	}
}

var commitCases = []struct {
	name string
	run  func(t *testing.T, h CommitHarness, s persistence.Committer)
}{
	{"CommitCompletesAndWrites", testCommitCompletesAndWrites},
	{"CommitWithoutWrites", testCommitWithoutWrites},
	{"CommitRepeated", testCommitRepeated},
	{"CommitFenced", testCommitFenced},
	{"CommitMissing", testCommitMissing},
	{"CommitCanceled", testCommitCanceled},
}

// counter names a counter of its own for the running test.
func counter(t *testing.T, which string) string {
	return "storetest-" + which + "-" + rand.Text()
}

func checkCount(t *testing.T, h CommitHarness, name string, want int, after string) {
	t.Helper()
	if got := h.Count(t, name); got != want {
		t.Errorf("counter %s after %s: %d, want %d", name, after, got, want)
	}
}

func testCommitCompletesAndWrites(t *testing.T, h CommitHarness, s persistence.Committer) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	a, b := counter(t, "a"), counter(t, "b")
	done := completed(rec, now, []byte(`{"ledger":"written"}`))
	if err := s.Commit(ctx(t), done, []any{h.Increment(t, a), h.Increment(t, b)}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	checkRecord(t, "Get after Commit", mustGet(t, s, rec.Key), done)
	checkCount(t, h, a, 1, "a Commit")
	checkCount(t, h, b, 1, "a Commit")
}

func testCommitWithoutWrites(t *testing.T, h CommitHarness, s persistence.Committer) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	done := completed(rec, now, []byte(`"nothing staged"`))
	if err := s.Commit(ctx(t), done, nil); err != nil {
		t.Fatalf("Commit without writes: %v", err)
	}
	checkRecord(t, "Get after a Commit without writes", mustGet(t, s, rec.Key), done)
}

// A Commit repeated with the same record and writes, as after a lost
// reply, applies the writes once.
func testCommitRepeated(t *testing.T, h CommitHarness, s persistence.Committer) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	n := counter(t, "n")
	done := completed(rec, now, []byte(`"once"`))
	writes := []any{h.Increment(t, n)}
	if err := s.Commit(ctx(t), done, writes); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := s.Commit(ctx(t), done, writes); err != nil {
		t.Fatalf("the same Commit again: %v", err)
	}
	checkRecord(t, "Get after a repeated Commit", mustGet(t, s, rec.Key), done)
	checkCount(t, h, n, 1, "a repeated Commit")
}

func testCommitFenced(t *testing.T, h CommitHarness, s persistence.Committer) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	n := counter(t, "n")
	intruder := completed(rec, now, []byte(`"late"`))
	intruder.Token = rand.Text()
	err := s.Commit(ctx(t), intruder, []any{h.Increment(t, n)})
	if !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("Commit with another token: got %v, want persistence.ErrFenced", err)
	}
	checkRecord(t, "Get after a fenced Commit", mustGet(t, s, rec.Key), rec)
	checkCount(t, h, n, 0, "a fenced Commit")
}

func testCommitMissing(t *testing.T, h CommitHarness, s persistence.Committer) {
	now := now()
	rec := completed(inProgress(newKey(t), now), now, []byte(`"x"`))
	n := counter(t, "n")
	if err := s.Commit(ctx(t), rec, []any{h.Increment(t, n)}); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("Commit of a missing record: got %v, want persistence.ErrFenced", err)
	}
	if got, err := s.Get(ctx(t), rec.Key); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get after a Commit of a missing record: got (%v, %v), want persistence.ErrNotFound", got, err)
	}
	checkCount(t, h, n, 0, "a Commit of a missing record")
}

// A write whose own condition fails cancels the commit: nothing is
// written, and the record stays in progress.
func testCommitCanceled(t *testing.T, h CommitHarness, s persistence.Committer) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	n := counter(t, "n")
	err := s.Commit(ctx(t), completed(rec, now, []byte(`"refused"`)), []any{h.Increment(t, n), h.Failing(t)})
	if !errors.Is(err, persistence.ErrCommitCanceled) {
		t.Fatalf("Commit with a failing write: got %v, want persistence.ErrCommitCanceled", err)
	}
	if !errors.As(err, new(*persistence.CommitCanceledError)) {
		t.Fatalf("Commit with a failing write: got %T, want a *persistence.CommitCanceledError", err)
	}
	checkRecord(t, "Get after a canceled Commit", mustGet(t, s, rec.Key), rec)
	checkCount(t, h, n, 0, "a canceled Commit")
}
