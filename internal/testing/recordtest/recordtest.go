// Package recordtest holds what the stores' own tests share besides the
// conformance suite (persistence/storetest): records to write, their
// comparison, and the records of a sweep.
package recordtest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/persistence"
)

// InProgress returns a reservation of key at now: it expires in an hour,
// and its in-progress expiry, in 30.25 seconds, is not a whole second.
func InProgress(key string, now time.Time) *persistence.Record {
	return &persistence.Record{
		Key:                 key,
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour),
		InProgressExpiresAt: now.Add(30*time.Second + 250*time.Millisecond),
		PayloadHash:         "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Token:               rand.Text(),
	}
}

// Diff describes how record got differs from want, or returns "" when they
// are equal as a store must round-trip them: times equal to the millisecond
// (ExpiresAt to the second), and an empty Response equal to a nil one.
func Diff(got, want *persistence.Record) string {
	if got == nil || want == nil {
		if got == want {
			return ""
		}
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	var b strings.Builder
	field := func(name string, g, w any) {
		fmt.Fprintf(&b, "  %s: got %v, want %v\n", name, g, w)
	}
	if got.Key != want.Key {
		field("Key", got.Key, want.Key)
	}
	if got.Status != want.Status {
		field("Status", got.Status, want.Status)
	}
	if got.ExpiresAt.Unix() != want.ExpiresAt.Unix() {
		field("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	}
	if got.InProgressExpiresAt.UnixMilli() != want.InProgressExpiresAt.UnixMilli() {
		field("InProgressExpiresAt", got.InProgressExpiresAt, want.InProgressExpiresAt)
	}
	if got.PayloadHash != want.PayloadHash {
		field("PayloadHash", got.PayloadHash, want.PayloadHash)
	}
	if got.Token != want.Token {
		field("Token", got.Token, want.Token)
	}
	if !bytes.Equal(got.Response, want.Response) {
		field("Response", describe(got.Response), describe(want.Response))
	}
	if got.ResponseOmitted != want.ResponseOmitted {
		field("ResponseOmitted", got.ResponseOmitted, want.ResponseOmitted)
	}
	if got.Held != want.Held {
		field("Held", got.Held, want.Held)
	}
	if got.ErrorType != want.ErrorType {
		field("ErrorType", got.ErrorType, want.ErrorType)
	}
	if got.ErrorMessage != want.ErrorMessage {
		field("ErrorMessage", got.ErrorMessage, want.ErrorMessage)
	}
	return b.String()
}

func describe(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%d bytes starting %q", len(b), b[:64])
	}
	return fmt.Sprintf("%q", b)
}

// Sweep checks a store's sweep of the records expired at now. It writes,
// with put, six records expired at now (five completed, one in progress)
// and three that a sweep at now keeps: a live completed one, one in
// progress past its in-progress expiry but not its expiry (its call may
// still complete it), and one that expires at now, not before it. It then
// sweeps them with sweep, four at a time, and checks that the six go, and
// that a limit of 0 is refused. It returns the keys of the three, sorted,
// which the store must still hold.
func Sweep(t testing.TB, now time.Time, put func(key string, expires, inProgressExpires time.Time, complete bool), sweep func(limit int) (int64, error)) []string {
	t.Helper()
	for i := range 5 {
		put(fmt.Sprintf("expired#%d", i), now.Add(-time.Second), time.Time{}, true)
	}
	put("expired#in-progress", now.Add(-time.Second), now.Add(-time.Minute), false)
	put("live#completed", now.Add(time.Hour), time.Time{}, true)
	put("live#lapsed", now.Add(time.Hour), now.Add(-time.Minute), false)
	put("live#at-now", now, time.Time{}, true)

	for _, want := range []int64{4, 2, 0} {
		n, err := sweep(4)
		require.NoError(t, err)
		require.Equal(t, want, n, "records deleted by a sweep of at most 4")
	}
	_, err := sweep(0)
	require.ErrorContains(t, err, "positive")
	return []string{"live#at-now", "live#completed", "live#lapsed"}
}
