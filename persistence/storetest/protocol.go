package storetest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/protocol"
	"github.com/retrysafe/retrysafe/persistence"
)

// The protocol's cases: every write of docs/protocol.md's table in every
// state, the record set up in that state and the write sent as a late
// write would reach the store. The cases are generated from the table
// (internal/protocol), the one the documentation shows and the model
// checker explores, so that the three cannot drift apart.

// runProtocol runs the table's rows for the writes of the Store interface.
func runProtocol(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	for _, row := range protocol.Table {
		if row.Write == protocol.Commit {
			continue // RunCommit's
		}
		t.Run(rowName(row), func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			checkRow(t, s, row, func(t *testing.T, key, mine string, prior *persistence.Record, now time.Time) (error, *persistence.Record) {
				return send(t, s, row.Write, key, mine, prior, now)
			})
		})
	}
}

// rowName names a row's subtest: "Protocol/renew/own_completed".
func rowName(row protocol.Row) string {
	name := func(s string) string { return strings.ReplaceAll(s, " ", "_") }
	return "Protocol/" + name(row.Write.String()) + "/" + name(row.State.String())
}

// sendFunc sends a row's write for the writer with token mine, to the
// record in the row's state (prior, nil when absent), and returns its
// error and the record the write would leave if it applies (nil: none).
type sendFunc func(t *testing.T, key, mine string, prior *persistence.Record, now time.Time) (err error, applied *persistence.Record)

// checkRow sets up a record in row's state, sends the write, and checks
// the outcome the table gives and the record it leaves.
func checkRow(t *testing.T, s persistence.Store, row protocol.Row, sendWrite sendFunc) {
	t.Helper()
	now := now()
	key := newKey(t)
	mine := rand.Text()
	prior := arrange(t, s, key, mine, row.State, now)
	// A store may delete an expired record at any time (Redis does at
	// once): the write then has its outcome on absent.
	wants := []protocol.Outcome{row.Outcome}
	if row.State.Expired() {
		wants = append(wants, protocol.Lookup(row.Write, protocol.Absent))
	}
	allowed := func(o protocol.Outcome) bool { return slices.Contains(wants, o) }
	err, applied := sendWrite(t, key, mine, prior, now)
	fail := func(got string) {
		t.Helper()
		t.Fatalf("%s on a record in state %q: %s, want it to %s (%s)", row.Write, row.State, got, row.Outcome, row.Why)
	}
	var conflict *persistence.ConflictError
	switch {
	case err == nil:
		if !allowed(protocol.Applies) && !allowed(protocol.Done) {
			fail("it succeeded")
		}
	case errors.As(err, &conflict):
		if !allowed(protocol.Conflict) {
			fail("conflict: " + err.Error())
		}
		checkConflict(t, err, prior)
	case errors.Is(err, persistence.ErrFenced):
		if !allowed(protocol.Refused) {
			fail("refused: " + err.Error())
		}
	default:
		fail(err.Error())
	}

	after := prior
	if err == nil && allowed(protocol.Applies) {
		after = applied
	}
	what := "the record after " + row.Write.String() + " on one in state " + row.State.String()
	got, err := s.Get(ctx(t), key)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		if after != nil && !(row.State.Expired() && after == prior) {
			t.Fatalf("%s: none, want %+v", what, after)
		}
	case err != nil:
		t.Fatalf("Get: %v", err)
	case after == nil:
		t.Fatalf("%s: %+v, want none", what, got)
	default:
		checkRecord(t, what, got, after)
	}
}

// arrange writes the record for key in state st, as seen from a writer
// with token mine, and returns it (nil for absent). Lapsed and expired
// records have their in-progress expiry or expiry in the past of now.
func arrange(t *testing.T, s persistence.Store, key, mine string, st protocol.State, now time.Time) *persistence.Record {
	t.Helper()
	if st == protocol.Absent {
		return nil
	}
	rec := inProgress(key, now)
	rec.Token = rand.Text()
	if st.Own() {
		rec.Token = mine
	}
	switch st {
	case protocol.OwnLapsed, protocol.OtherLapsed:
		rec.InProgressExpiresAt = now.Add(-2 * time.Second)
	case protocol.OwnHeld, protocol.OtherHeld:
		rec.InProgressExpiresAt = now.Add(-2 * time.Second)
		rec.Held = true
	}
	// Reserved at a time when the record is free, and (for the lapsed
	// states) live.
	reservedAt := now.Add(-time.Minute)
	mustPut(t, s, rec, reservedAt)
	if st.InProgress() {
		return rec
	}
	done := completed(rec, now, []byte(`{"arranged":"`+st.String()+`"}`))
	if st.Expired() {
		done.ExpiresAt = now.Add(-2 * time.Second)
	}
	mustUpdate(t, s, done)
	return done
}

// send sends write w of the Store interface for the writer with token
// mine.
func send(t *testing.T, s persistence.Store, w protocol.Write, key, mine string, prior *persistence.Record, now time.Time) (error, *persistence.Record) {
	t.Helper()
	switch w {
	case protocol.Reserve:
		rec := inProgress(key, now)
		rec.Token = mine
		return s.Put(ctx(t), rec, now), rec
	case protocol.Renew:
		rec := renewal(key, mine, prior, now)
		return s.Update(ctx(t), rec), rec
	case protocol.Complete, protocol.RecordError:
		rec := completion(w, key, mine, prior, now)
		return s.Update(ctx(t), rec), rec
	case protocol.Release:
		return s.Delete(ctx(t), key, mine), nil
	case protocol.WriteStep:
		rec := completion(w, key, mine, prior, now)
		return s.Put(ctx(t), rec, now), rec
	}
	t.Fatalf("no Store method sends %s", w)
	return nil, nil
}

// renewal is the writer's renewal of its reservation: a later in-progress
// expiry.
func renewal(key, mine string, prior *persistence.Record, now time.Time) *persistence.Record {
	rec := inProgress(key, now)
	if prior != nil {
		rec.PayloadHash, rec.Held = prior.PayloadHash, prior.Held
	}
	rec.Token = mine
	rec.InProgressExpiresAt = now.Add(10 * time.Minute).Add(77 * time.Millisecond)
	return rec
}

// completion is the writer's completion of its reservation, with a result
// (or, for RecordError, an error) that differs from whatever the record
// holds, so that a store that writes where the table says it must not is
// caught.
func completion(w protocol.Write, key, mine string, prior *persistence.Record, now time.Time) *persistence.Record {
	rec := inProgress(key, now)
	if prior != nil {
		rec.PayloadHash = prior.PayloadHash
	}
	rec.Token = mine
	rec = completed(rec, now.Add(time.Hour), []byte(`{"late":"`+w.String()+`"}`))
	rec.InProgressExpiresAt = time.Time{}
	if w == protocol.RecordError {
		rec.Response = nil
		rec.ErrorType = "LateError"
		rec.ErrorMessage = "recorded late"
	}
	return rec
}

// testOperatorRelease: the operator's release deletes the record it read,
// in progress or completed, and nothing else: not a record that changed
// since (renewed, completed, taken over), and not one that is gone.
func testOperatorRelease(t *testing.T, s persistence.Store) {
	d, ok := s.(persistence.Admin)
	if !ok {
		t.Skip("the store does not implement persistence.Admin")
	}
	now := now()
	seenInProgress := func(t *testing.T) *persistence.Record {
		rec := inProgress(newKey(t), now)
		mustPut(t, s, rec, now)
		return mustGet(t, s, rec.Key)
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, seen *persistence.Record) *persistence.Record // the record after the change; nil: none
		want   error
	}{
		{"InProgress", func(*testing.T, *persistence.Record) *persistence.Record { return nil }, nil},
		{"Completed", func(t *testing.T, seen *persistence.Record) *persistence.Record {
			done := completed(seen, now, []byte(`"seen"`))
			mustUpdate(t, s, done)
			return nil
		}, nil},
		{"Renewed", func(t *testing.T, seen *persistence.Record) *persistence.Record {
			renewed := *seen
			renewed.InProgressExpiresAt = seen.InProgressExpiresAt.Add(time.Minute)
			mustUpdate(t, s, &renewed)
			return &renewed
		}, persistence.ErrChanged},
		{"CompletedSince", func(t *testing.T, seen *persistence.Record) *persistence.Record {
			done := completed(seen, now, []byte(`"since"`))
			mustUpdate(t, s, done)
			return done
		}, persistence.ErrChanged},
		{"TakenOver", func(t *testing.T, seen *persistence.Record) *persistence.Record {
			later := seen.InProgressExpiresAt.Add(time.Second)
			next := inProgress(seen.Key, later)
			mustPut(t, s, next, later)
			return next
		}, persistence.ErrChanged},
		{"Released", func(t *testing.T, seen *persistence.Record) *persistence.Record {
			if err := s.Delete(ctx(t), seen.Key, seen.Token); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			return nil
		}, persistence.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := seenInProgress(t)
			after := tc.change(t, seen)
			if tc.name == "Completed" {
				seen = mustGet(t, s, seen.Key) // the operator reads the completed record
			}
			err := d.DeleteRecord(ctx(t), seen)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("DeleteRecord of the record read: %v", err)
				}
			} else if !errors.Is(err, tc.want) {
				t.Fatalf("DeleteRecord: %v, want %v", err, tc.want)
			}
			got, err := s.Get(ctx(t), seen.Key)
			switch {
			case after == nil && !errors.Is(err, persistence.ErrNotFound):
				t.Fatalf("Get after DeleteRecord: (%+v, %v), want none", got, err)
			case after != nil && err != nil:
				t.Fatalf("Get after a refused DeleteRecord: %v", err)
			case after != nil:
				checkRecord(t, "the record after a refused DeleteRecord", got, after)
			}
		})
	}
}

// testAdminList checks persistence.Admin's List, for the stores that
// implement it: the records under a key prefix, in pages, without their
// responses.
func testAdminList(t *testing.T, s persistence.Store) {
	admin, ok := s.(persistence.Admin)
	if !ok {
		t.Skip("the store does not implement persistence.Admin")
	}
	now := now()
	prefix := newKey(t) + "/"
	want := map[string]*persistence.Record{}
	for i := range 5 {
		rec := inProgress(fmt.Sprintf("%s%d", prefix, i), now)
		rec.Held = i == 1 // a held reservation is listed as held
		mustPut(t, s, rec, now)
		if i%2 == 0 {
			rec = completed(rec, now, []byte(`{"listed":false}`))
			mustUpdate(t, s, rec)
		}
		listed := *rec
		listed.Response = nil
		want[rec.Key] = &listed
	}
	mustPut(t, s, inProgress(prefix[:len(prefix)-1]+"-other", now), now)

	got := map[string]*persistence.Record{}
	pages := 0
	err := admin.List(ctx(t), prefix, 2, func(page []*persistence.Record) error {
		pages++
		for _, rec := range page {
			got[rec.Key] = rec
		}
		return nil
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("List(%q) found %d records, want %d: %v", prefix, len(got), len(want), got)
	}
	for key, rec := range want {
		checkRecord(t, "a listed record, without its response", got[key], rec)
	}
	if pages < 3 {
		t.Errorf("List with pages of 2 read %d pages of 5 records", pages)
	}
	stop := errors.New("stop")
	if err := admin.List(ctx(t), prefix, 2, func([]*persistence.Record) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("List: %v, want the page function's error", err)
	}
}
