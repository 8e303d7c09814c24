// Package storetest is the conformance suite for implementations of
// [persistence.Store], in the spirit of testing/slogtest. A store that
// passes [Run] behaves as package idempotency expects, whatever it is
// backed by.
//
// A store's own tests call Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) persistence.Store {
//			return mystore.New(...)
//		})
//	}
//
// Every subtest uses keys of its own, so the constructor may return one
// shared store. Subtests run in parallel.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
)

// Run runs the conformance suite against the stores that newStore returns.
// newStore is called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
	runProtocol(t, newStore)
}

// parallelPuts is the number of concurrent reservations of one key in the
// "ParallelPutsOneWinner" case.
const parallelPuts = 50

var cases = []struct {
	name string
	run  func(t *testing.T, s persistence.Store)
}{
	{"PutNew", testPutNew},
	{"PutOverLiveInProgress", testPutOverLiveInProgress},
	{"PutOverLiveCompleted", testPutOverLiveCompleted},
	{"PutOverExpired", testPutOverExpired},
	{"PutOverInProgressExpired", testPutOverInProgressExpired},
	{"CompletedIgnoresInProgressExpiry", testCompletedIgnoresInProgressExpiry},
	{"LateCompletionWithoutTakeover", testLateCompletionWithoutTakeover},
	{"RenewInProgress", testRenewInProgress},
	{"RenewalNeverShortens", testRenewalNeverShortens},
	{"PutAfterDelete", testPutAfterDelete},
	{"GetMissing", testGetMissing},
	{"UpdateRoundTrip", testUpdateRoundTrip},
	{"UpdateRecordedError", testUpdateRecordedError},
	{"UpdateRepeated", testUpdateRepeated},
	{"UpdateFenced", testUpdateFenced},
	{"UpdateMissing", testUpdateMissing},
	{"DeleteFenced", testDeleteFenced},
	{"DeleteOwnAndRepeat", testDeleteOwnAndRepeat},
	{"KeysAreIndependent", testKeysAreIndependent},
	{"TenantsKeepRecordsApart", testTenantsKeepRecordsApart},
	{"StoreKeepsItsOwnCopy", testStoreKeepsItsOwnCopy},
	{"ParallelPutsOneWinner", testParallelPuts},
	{"LocalReads", testLocalReads},
	{"OperatorRelease", testOperatorRelease},
	{"AdminList", testAdminList},
	{"StepWrittenOnlyIfAbsent", testStepWrittenOnlyIfAbsent},
}

// now is the suite's reference time: a whole second, so that stores that keep
// ExpiresAt in epoch seconds round-trip it exactly.
func now() time.Time { return time.Now().Truncate(time.Second) }

func newKey(t *testing.T) string {
	return "storetest." + strings.ReplaceAll(t.Name(), "/", ".") + "#" + rand.Text()
}

func inProgress(key string, now time.Time) *persistence.Record {
	return &persistence.Record{
		Key:    key,
		Status: persistence.StatusInProgress,
		// ExpiresAt is a whole second, as the contract asks of callers, even
		// when now is not.
		ExpiresAt:           now.Add(time.Hour).Truncate(time.Second),
		InProgressExpiresAt: now.Add(30 * time.Second).Add(123 * time.Millisecond),
		PayloadHash:         "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
		Token:               rand.Text(),
	}
}

func completed(rec *persistence.Record, now time.Time, response []byte) *persistence.Record {
	c := *rec
	c.Status = persistence.StatusCompleted
	c.ExpiresAt = now.Add(time.Hour)
	c.Response = response
	return &c
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustPut(t *testing.T, s persistence.Store, rec *persistence.Record, now time.Time) {
	t.Helper()
	if err := s.Put(ctx(t), rec, now); err != nil {
		t.Fatalf("Put(%q): %v", rec.Key, err)
	}
}

func mustUpdate(t *testing.T, s persistence.Store, rec *persistence.Record) {
	t.Helper()
	if err := s.Update(ctx(t), rec); err != nil {
		t.Fatalf("Update(%q): %v", rec.Key, err)
	}
}

func mustGet(t *testing.T, s persistence.Store, key string) *persistence.Record {
	t.Helper()
	rec, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if rec == nil {
		t.Fatalf("Get(%q) returned a nil record and no error", key)
	}
	return rec
}

// checkRecord reports how got differs from want, field by field.
func checkRecord(t *testing.T, what string, got, want *persistence.Record) {
	t.Helper()
	if diff := recordtest.Diff(got, want); diff != "" {
		t.Errorf("%s: record differs from what was written:\n%s", what, diff)
	}
}

// checkConflict checks that err is a conflict, and that the existing record
// it carries, if any, is want.
func checkConflict(t *testing.T, err error, want *persistence.Record) {
	t.Helper()
	var conflict *persistence.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("Put over a live record: got error %v, want a *persistence.ConflictError", err)
	}
	if !errors.Is(err, persistence.ErrConflict) {
		t.Errorf("errors.Is(%v, persistence.ErrConflict) = false", err)
	}
	if conflict.Existing != nil {
		checkRecord(t, "ConflictError.Existing", conflict.Existing, want)
	}
}

func testPutNew(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	checkRecord(t, "Get after Put", mustGet(t, s, rec.Key), rec)
}

func testPutOverLiveInProgress(t *testing.T, s persistence.Store) {
	now := now()
	first := inProgress(newKey(t), now)
	mustPut(t, s, first, now)

	second := inProgress(first.Key, now)
	second.PayloadHash = "other"
	checkConflict(t, s.Put(ctx(t), second, now.Add(time.Second)), first)
	checkRecord(t, "Get after a refused Put", mustGet(t, s, first.Key), first)
}

func testPutOverLiveCompleted(t *testing.T, s persistence.Store) {
	now := now()
	first := inProgress(newKey(t), now)
	mustPut(t, s, first, now)
	done := completed(first, now, []byte(`{"ok":true}`))
	mustUpdate(t, s, done)

	// Past the in-progress expiry, but a completed record is live until
	// ExpiresAt.
	later := now.Add(time.Minute)
	checkConflict(t, s.Put(ctx(t), inProgress(first.Key, later), later), done)
	checkRecord(t, "Get after a refused Put", mustGet(t, s, first.Key), done)
}

func testPutOverExpired(t *testing.T, s persistence.Store) {
	now := now()
	first := inProgress(newKey(t), now)
	mustPut(t, s, first, now)
	done := completed(first, now, []byte(`"old"`))
	done.ExpiresAt = now.Add(2 * time.Second)
	mustUpdate(t, s, done)

	later := now.Add(10 * time.Second)
	second := inProgress(first.Key, later)
	if err := s.Put(ctx(t), second, later); err != nil {
		t.Fatalf("Put over a record that expired at %v, at %v: %v", done.ExpiresAt, later, err)
	}
	checkRecord(t, "Get after taking over an expired record", mustGet(t, s, first.Key), second)
}

func testPutOverInProgressExpired(t *testing.T, s persistence.Store) {
	now := now()
	first := inProgress(newKey(t), now)
	first.InProgressExpiresAt = now.Add(1500 * time.Millisecond)
	mustPut(t, s, first, now)

	// Just before the in-progress expiry, the key is still held.
	before := now.Add(1400 * time.Millisecond)
	checkConflict(t, s.Put(ctx(t), inProgress(first.Key, before), before), first)

	after := now.Add(1600 * time.Millisecond)
	second := inProgress(first.Key, after)
	if err := s.Put(ctx(t), second, after); err != nil {
		t.Fatalf("Put over an in-progress record past its in-progress expiry: %v", err)
	}
	checkRecord(t, "Get after taking over", mustGet(t, s, first.Key), second)
}

func testCompletedIgnoresInProgressExpiry(t *testing.T, s persistence.Store) {
	now := now()
	first := inProgress(newKey(t), now)
	first.InProgressExpiresAt = now.Add(time.Second)
	mustPut(t, s, first, now)
	done := completed(first, now, []byte(`1`))
	mustUpdate(t, s, done)

	later := now.Add(5 * time.Second)
	checkConflict(t, s.Put(ctx(t), inProgress(first.Key, later), later), done)
}

// lateWrites is the number of reservations of other keys that the
// "LateCompletionWithoutTakeover" case makes while a record is past its
// in-progress expiry: enough to set off the housekeeping of a store that
// drops records as it takes new ones.
const lateWrites = 64

// testLateCompletionWithoutTakeover: a record past its in-progress expiry
// but not its expiry stays in the store, however much traffic other keys
// see, so that its invocation, running late, still completes it when no
// other invocation has taken the key over. A store drops a record only
// once its ExpiresAt has passed.
func testLateCompletionWithoutTakeover(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	rec.InProgressExpiresAt = now.Add(time.Second)
	mustPut(t, s, rec, now)

	later := now.Add(5 * time.Second)
	for i := range lateWrites {
		mustPut(t, s, inProgress(fmt.Sprintf("%s-other-%d", rec.Key, i), later), later)
	}
	checkRecord(t, "Get of a lapsed reservation after other keys' traffic", mustGet(t, s, rec.Key), rec)
	done := completed(rec, later, []byte(`"late"`))
	if err := s.Update(ctx(t), done); err != nil {
		t.Fatalf("Update by the owner of a lapsed reservation that nobody took over: %v, want it to land", err)
	}
	checkRecord(t, "Get after the late completion", mustGet(t, s, rec.Key), done)
}

// testRenewInProgress: an Update of an in-progress record by its owner
// (a lease renewal) extends its in-progress expiry, and keeps it in
// progress; an Update with another token is fenced.
func testRenewInProgress(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	rec.InProgressExpiresAt = now.Add(time.Second)
	mustPut(t, s, rec, now)

	renewed := *rec
	renewed.InProgressExpiresAt = now.Add(time.Minute)
	mustUpdate(t, s, &renewed)
	checkRecord(t, "Get after a renewal", mustGet(t, s, rec.Key), &renewed)
	later := now.Add(5 * time.Second) // past the first in-progress expiry
	checkConflict(t, s.Put(ctx(t), inProgress(rec.Key, later), later), &renewed)

	intruder := renewed
	intruder.Token = rand.Text()
	intruder.InProgressExpiresAt = now.Add(time.Hour)
	if err := s.Update(ctx(t), &intruder); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("renewal with another token: got %v, want persistence.ErrFenced", err)
	}
	done := completed(&renewed, later, []byte(`"renewed"`))
	mustUpdate(t, s, done)
	checkRecord(t, "Get after completing a renewed record", mustGet(t, s, rec.Key), done)
}

// testRenewalNeverShortens: a renewal applies only when it extends the
// in-progress expiry. An attempt of an earlier renewal that reaches the
// store after a later one (held in the network while the client's retry
// went through) finds a later expiry there, writes nothing, and succeeds:
// written, it would end the lease before its holder thinks it does.
func testRenewalNeverShortens(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	later := *rec
	later.InProgressExpiresAt = now.Add(10 * time.Minute)
	mustUpdate(t, s, &later)
	earlier := *rec
	earlier.InProgressExpiresAt = now.Add(5 * time.Minute)
	if err := s.Update(ctx(t), &earlier); err != nil {
		t.Fatalf("an earlier renewal applied after a later one: %v, want it to change nothing and succeed", err)
	}
	checkRecord(t, "Get after an earlier renewal arrived late", mustGet(t, s, rec.Key), &later)
	// The same renewal again (a retry whose reply was lost) is no error.
	mustUpdate(t, s, &later)
	checkRecord(t, "Get after a renewal sent again", mustGet(t, s, rec.Key), &later)
}

func testPutAfterDelete(t *testing.T, s persistence.Store) {
	now := now()
	first := inProgress(newKey(t), now)
	mustPut(t, s, first, now)
	if err := s.Delete(ctx(t), first.Key, first.Token); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	second := inProgress(first.Key, now)
	mustPut(t, s, second, now)
	checkRecord(t, "Get after Delete and Put", mustGet(t, s, first.Key), second)
}

func testGetMissing(t *testing.T, s persistence.Store) {
	rec, err := s.Get(ctx(t), newKey(t))
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get of a missing key: got (%v, %v), want persistence.ErrNotFound", rec, err)
	}
}

// Responses stores must return byte for byte.
var responses = []struct {
	name string
	data []byte
}{
	{"nil", nil},
	{"empty", []byte{}},
	{"null", []byte("null")},
	{"json", []byte(`{"statusCode":201,"body":"{\"id\":\"p_1\"}","headers":{"Content-Type":"application/json"}}`)},
	{"non-ASCII", []byte(`{"name":"Zoë Ñandú","city":"東京","note":"🚀 – ok"}`)},
	{"binary", binary()},
	{"large", large()},
}

func binary() []byte {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// large is 200 KB of JSON that does not compress to nothing, under
// DynamoDB's 400 KB item limit.
func large() []byte {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < 200<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"n":%d,"id":%q}`, i, rand.Text())
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func testUpdateRoundTrip(t *testing.T, s persistence.Store) {
	for _, r := range responses {
		t.Run(r.name, func(t *testing.T) {
			now := now()
			rec := inProgress(newKey(t), now)
			mustPut(t, s, rec, now)
			done := completed(rec, now, bytes.Clone(r.data))
			mustUpdate(t, s, done)
			checkRecord(t, "Get after Update", mustGet(t, s, rec.Key), done)

			// The conflict path must carry the same bytes.
			err := s.Put(ctx(t), inProgress(rec.Key, now), now)
			checkConflict(t, err, done)
		})
	}
}

func testUpdateRecordedError(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	done := completed(rec, now, nil)
	done.ErrorType = "CardDeclinedError"
	done.ErrorMessage = "card declined: insufficient funds (ref 42) – réessayez"
	mustUpdate(t, s, done)
	checkRecord(t, "Get after recording an error", mustGet(t, s, rec.Key), done)
}

func testUpdateRepeated(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	done := completed(rec, now, []byte(`"once"`))
	mustUpdate(t, s, done)
	// A retried Update whose first reply was lost.
	mustUpdate(t, s, done)
	checkRecord(t, "Get after a repeated Update", mustGet(t, s, rec.Key), done)
}

func testUpdateFenced(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)

	intruder := completed(rec, now, []byte(`"late"`))
	intruder.Token = rand.Text()
	if err := s.Update(ctx(t), intruder); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("Update with another token: got %v, want persistence.ErrFenced", err)
	}
	checkRecord(t, "Get after a fenced Update", mustGet(t, s, rec.Key), rec)
}

func testUpdateMissing(t *testing.T, s persistence.Store) {
	now := now()
	rec := completed(inProgress(newKey(t), now), now, []byte(`"x"`))
	if err := s.Update(ctx(t), rec); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("Update of a missing record: got %v, want persistence.ErrFenced", err)
	}
	if got, err := s.Get(ctx(t), rec.Key); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get after a fenced Update of a missing record: got (%v, %v), want persistence.ErrNotFound", got, err)
	}
}

func testDeleteFenced(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	if err := s.Delete(ctx(t), rec.Key, rand.Text()); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("Delete with another token: got %v, want persistence.ErrFenced", err)
	}
	checkRecord(t, "Get after a fenced Delete", mustGet(t, s, rec.Key), rec)
}

func testDeleteOwnAndRepeat(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	if err := s.Delete(ctx(t), rec.Key, rec.Token); err != nil {
		t.Fatalf("Delete with the owner's token: %v", err)
	}
	if got, err := s.Get(ctx(t), rec.Key); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get after Delete: got (%v, %v), want persistence.ErrNotFound", got, err)
	}
	// A retried Delete whose first reply was lost.
	if err := s.Delete(ctx(t), rec.Key, rec.Token); err != nil {
		t.Fatalf("Delete of a record that is already gone: %v", err)
	}
}

func testKeysAreIndependent(t *testing.T, s persistence.Store) {
	now := now()
	a := inProgress(newKey(t), now)
	b := inProgress(a.Key+"-other", now)
	mustPut(t, s, a, now)
	mustPut(t, s, b, now)
	if err := s.Delete(ctx(t), a.Key, a.Token); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	checkRecord(t, "Get of the other key", mustGet(t, s, b.Key), b)
}

// The keys of one key material for different tenants (Lambda's tenant
// isolation mode), and without a tenant, are different records: a
// completed record of one tenant answers no reservation of another.
func testTenantsKeepRecordsApart(t *testing.T, s persistence.Store) {
	now := now()
	prefix := "storetest." + strings.ReplaceAll(t.Name(), "/", ".") + "." + rand.Text()
	material := []byte(`{"order_id":"1001"}`)
	blue := inProgress(core.Key(prefix, "blue", material), now)
	mustPut(t, s, blue, now)
	done := completed(blue, now, []byte(`{"tenant":"blue"}`))
	mustUpdate(t, s, done)
	for _, tenant := range []string{"green", "Blue", "blue ", "blue#x", "b%6Cue", ""} {
		other := inProgress(core.Key(prefix, tenant, material), now)
		if other.Key == blue.Key {
			t.Fatalf("tenant %q has blue's key %q", tenant, blue.Key)
		}
		if err := s.Put(ctx(t), other, now); err != nil {
			t.Fatalf("Put of tenant %q's reservation (%q) over blue's completed record: %v", tenant, other.Key, err)
		}
		checkRecord(t, fmt.Sprintf("Get of tenant %q's record", tenant), mustGet(t, s, other.Key), other)
	}
	checkRecord(t, "Get of blue's record", mustGet(t, s, blue.Key), done)
}

func testStoreKeepsItsOwnCopy(t *testing.T, s persistence.Store) {
	now := now()
	rec := inProgress(newKey(t), now)
	mustPut(t, s, rec, now)
	response := []byte(`{"id":"p_1"}`)
	done := completed(rec, now, response)
	mustUpdate(t, s, done)
	want := *done
	want.Response = bytes.Clone(response)

	// Changing the caller's record and bytes must not change the store.
	response[2] = 'X'
	done.Status = persistence.StatusInProgress
	checkRecord(t, "Get after the caller changed its copy", mustGet(t, s, rec.Key), &want)
}

// testLocalReads checks persistence.LocalReader, for the stores that
// implement it: only live completed records, as copies.
func testLocalReads(t *testing.T, s persistence.Store) {
	local, ok := s.(persistence.LocalReader)
	if !ok {
		t.Skip("the store does not implement persistence.LocalReader")
	}
	now := now()
	rec := inProgress(newKey(t), now)
	if got := local.ReadLocal(rec.Key, now); got != nil {
		t.Fatalf("ReadLocal of a missing key: %+v, want nil", got)
	}
	mustPut(t, s, rec, now)
	if got := local.ReadLocal(rec.Key, now); got != nil {
		t.Fatalf("ReadLocal of an in-progress record: %+v, want nil", got)
	}
	done := completed(rec, now, []byte(`{"id":"p_1"}`))
	mustUpdate(t, s, done)
	got := local.ReadLocal(rec.Key, now.Add(time.Minute))
	if got == nil {
		t.Fatal("ReadLocal of a live completed record: nil")
	}
	checkRecord(t, "ReadLocal", got, done)

	// The record is the caller's copy.
	got.Status, got.PayloadHash = persistence.StatusInProgress, "changed"
	checkRecord(t, "ReadLocal after the caller changed its copy", local.ReadLocal(rec.Key, now), done)

	if got := local.ReadLocal(rec.Key, done.ExpiresAt.Add(time.Second)); got != nil {
		t.Fatalf("ReadLocal of an expired record: %+v, want nil", got)
	}
}

func testParallelPuts(t *testing.T, s persistence.Store) {
	now := now()
	key := newKey(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []*persistence.Record
		others  []error
	)
	for range parallelPuts {
		rec := inProgress(key, now)
		wg.Go(func() {
			err := s.Put(ctx(t), rec, now)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners = append(winners, rec)
			} else {
				others = append(others, err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d concurrent Puts of one key: %d succeeded, want exactly 1", parallelPuts, len(winners))
	}
	for _, err := range others {
		if !errors.Is(err, persistence.ErrConflict) {
			t.Errorf("a losing Put returned %v, want a *persistence.ConflictError", err)
		}
	}
	checkRecord(t, "Get after the race", mustGet(t, s, key), winners[0])
}

// A step's record (idempotency.Step) is a completed record that Put writes
// over a free key, under the step's key (core.StepKey). The first one
// written wins until it expires: a completed record is live.
func testStepWrittenOnlyIfAbsent(t *testing.T, s persistence.Store) {
	now := now()
	step := func(token string, response []byte, expires time.Time) *persistence.Record {
		return &persistence.Record{
			Key:         core.StepKey(newKey(t), "charge card/1"),
			Status:      persistence.StatusCompleted,
			ExpiresAt:   expires,
			PayloadHash: "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
			Token:       token,
			Response:    response,
		}
	}
	first := step(rand.Text(), []byte(`"ch_1"`), now.Add(2*time.Second))
	mustPut(t, s, first, now)
	checkRecord(t, "Get after a step's Put", mustGet(t, s, first.Key), first)

	late := step(rand.Text(), []byte(`"ch_2"`), now.Add(time.Hour))
	late.Key = first.Key
	checkConflict(t, s.Put(ctx(t), late, now.Add(time.Second)), first)
	checkRecord(t, "Get after a late step's Put", mustGet(t, s, first.Key), first)
	if err := s.Delete(ctx(t), first.Key, first.Token); !errors.Is(err, persistence.ErrFenced) {
		t.Errorf("Delete of a step's record: got %v, want persistence.ErrFenced", err)
	}

	// Past its expiry, the step's record is forgotten.
	later := now.Add(3 * time.Second)
	mustPut(t, s, late, later)
	checkRecord(t, "Get after a Put over an expired step", mustGet(t, s, first.Key), late)
}
