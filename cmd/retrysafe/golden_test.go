package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenNow is the clock of the golden outputs, so that their times and
// the times relative to now stay the same.
var goldenNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// goldenRecords are the records of the golden outputs, one in each state.
var goldenRecords = func() []*persistence.Record {
	key := func(prefix, id string) string { return core.Key(prefix, "", []byte(`"`+id+`"`)) }
	at := func(d time.Duration) time.Time { return goldenNow.Add(d) }
	return []*persistence.Record{
		{Key: key("orders.main.process", "ord_1001"), Status: persistence.StatusCompleted, ExpiresAt: at(50 * time.Minute),
			PayloadHash: core.Hash([]byte("1999")), Token: "QJ5WZ2TXNB3RFMXKC4YV7DLAHE",
			Response: []byte(`{"receipt":"rcpt_ord_1001","amount":1999}`)},
		{Key: key("orders.main.process", "ord_1002"), Status: persistence.StatusInProgress, ExpiresAt: at(59 * time.Minute),
			InProgressExpiresAt: at(14*time.Minute + 30*time.Second), Token: "W6GQ3M2ZKT5VYHNBX4RCFJ7LPA"},
		{Key: key("orders.main.process", "ord_1003"), Status: persistence.StatusInProgress, ExpiresAt: at(30 * time.Minute),
			InProgressExpiresAt: at(-15 * time.Minute), Token: "H3KT7XQ2MZBV5WYCN6RDLF4JGA"},
		{Key: key("orders.main.process", "ord_1004"), Status: persistence.StatusCompleted, ExpiresAt: at(55 * time.Minute),
			Token: "B7NRX4KQ2TZW6MHYC3VDLJ5FPA", ErrorType: "*payment.DeclinedError", ErrorMessage: "card declined: insufficient funds"},
		{Key: key("refunds.main.refund", "ref_2001"), Status: persistence.StatusCompleted, ExpiresAt: at(-5 * time.Minute),
			Token: "M2ZQ6TKX4BWR7NHYC5VDLJ3FPA", Response: []byte(`"ok"`)},
		// An HTTP adapter's, kept for a day, with the in-progress expiry
		// its reservation had.
		{Key: key("payments.main.createPayment", "8e03978e-40d5-43e8-bc93-6894a57f9324"), Status: persistence.StatusCompleted,
			ExpiresAt: at(23 * time.Hour), InProgressExpiresAt: at(-45 * time.Minute), Token: "T4KXQ7ZM2BWR6NHYC3VDLJ5FPA",
			PayloadHash: core.Hash([]byte("fingerprint")),
			Response:    []byte(`{"statusCode":201,"headers":{"content-type":"application/json"},"body":"{\"payment_id\":\"pay_1\"}"}`)},
		// A withdrawal whose call timed out, held for an operator
		// (WithHoldUntilReleased).
		{Key: key("payouts.main.withdraw", "wd_3001"), Status: persistence.StatusInProgress, ExpiresAt: at(40 * time.Minute),
			InProgressExpiresAt: at(-20 * time.Minute), Token: "R5TQX2KZ7MBW4NHYC6VDLJ3FPA", Held: true},
	}
}()

// putGolden writes the golden records to the fixture's store.
func putGolden(t *testing.T, f *fixture) {
	t.Helper()
	for _, rec := range goldenRecords {
		reserved := *rec
		reserved.Status, reserved.Response, reserved.ErrorType, reserved.ErrorMessage = persistence.StatusInProgress, nil, "", ""
		require.NoError(t, f.store.Put(t.Context(), &reserved, time.Now()))
		if rec.Status == persistence.StatusCompleted {
			require.NoError(t, f.store.Update(t.Context(), rec))
		}
	}
}

// requireSweptGolden checks the golden records after a sweep: the expired
// one is gone, and the six others are kept, the stuck and the held ones
// among them.
func requireSweptGolden(t *testing.T, f *fixture) {
	t.Helper()
	r := runAt(t, goldenNow, "", f.with("get", goldenRecords[4].Key)...) // the expired one
	require.Equal(t, exitNotFound, r.code, r.stderr)
	r = runAt(t, goldenNow, "", f.with("stats", "-o", "json")...)
	requireOK(t, r)
	var stats struct {
		Records int            `json:"records"`
		ByState map[string]int `json:"by_state"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &stats))
	require.Equal(t, 6, stats.Records)
	require.Equal(t, 1, stats.ByState["stuck"], "a stuck record is kept")
	require.Equal(t, 1, stats.ByState["held"], "and so is a held one")
}

// golden compares got with testdata/golden/name, or writes it there with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to write the golden files")
	require.Equal(t, string(want), got, "output differs from %s (go test -update rewrites it)", path)
}

func TestGoldenOutputs(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		putGolden(t, f)
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"get-completed.txt", []string{"get", goldenRecords[0].Key}},
			{"get-completed.json", []string{"get", goldenRecords[0].Key, "-o", "json"}},
			{"get-in-progress.txt", []string{"get", goldenRecords[1].Key}},
			{"get-stuck.txt", []string{"get", goldenRecords[2].Key}},
			{"get-stuck.json", []string{"get", goldenRecords[2].Key, "-o", "json"}},
			{"get-recorded-error.txt", []string{"get", goldenRecords[3].Key}},
			{"get-http.txt", []string{"get", goldenRecords[5].Key}},
			{"get-held.txt", []string{"get", goldenRecords[6].Key}},
			{"get-held.json", []string{"get", goldenRecords[6].Key, "-o", "json"}},
			{"ls-held.txt", []string{"ls", "--held"}},
			{"ls.txt", []string{"ls"}},
			{"ls.json", []string{"ls", "-o", "json"}},
			{"ls-stuck.txt", []string{"ls", "--stuck"}},
			{"ls-older-than.txt", []string{"ls", "--older-than", "20m", "--prefix", "orders."}},
			{"ls-http.txt", []string{"ls", "--prefix", "payments.", "--expiry", "24h"}},
			{"ls-wide.txt", []string{"ls", "-o", "wide"}},
			{"stats.txt", []string{"stats"}},
			{"stats.json", []string{"stats", "-o", "json"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := runAt(t, goldenNow, "", f.with(tc.args...)...)
				requireOK(t, r)
				golden(t, tc.name, r.stdout)
				// The HTTP adapters' record is a day-long one: its age is
				// known without --expiry.
				require.NotContains(t, r.stderr, "expire more than")
			})
		}
	})
}

func TestGoldenKey(t *testing.T) {
	event := filepath.Join("testdata", "events", "charge.json")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"key.txt", []string{"key", "--function", "payments", "--handler", "main.charge", "--key", "order_id", "--validation", "amount", event}},
		{"key.json", []string{"key", "--prefix", "payments.main.charge", "--key", "order_id", "-o", "json", event}},
		{"key-http.txt", []string{"key", "--http", "auto", "--prefix", "payments.main.createPayment", "--scope", "header:X-Tenant",
			filepath.Join("testdata", "events", "post-payment.json")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAt(t, goldenNow, "", tc.args...)
			requireOK(t, r)
			golden(t, tc.name, r.stdout)
		})
	}
}
