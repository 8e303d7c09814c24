package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

var getCommand = &command{
	name:    "get",
	args:    "KEY",
	summary: "show a record: its state, expiry, owner, and response or recorded error",
	about: `The state says what a retry with the key gets: why it answers 409 (a call
holds the key until its in-progress expiry), whether the key is stuck (in
progress past that expiry: the next retry runs the handler again), whether
it is held for release (WithHoldUntilReleased: retries are refused until
someone runs release), the stored response, or a recorded error. Times are in UTC and relative to now.
Responses are shown decompressed; -o json prints the record for scripts.`,
	flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		sf := &storeFlags{}
		sf.register(fs)
		out := outputFlag(fs)
		return func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError("give one key (see 'retrysafe key'), not %d arguments", len(args))
			}
			return sf.use(ctx, e, func(ctx context.Context, st *store) error {
				rec, err := readRecord(ctx, st, args[0])
				if err != nil {
					return err
				}
				now := e.now()
				if out.json {
					return writeJSON(e.stdout, toJSON(rec, now, time.Time{}).withResponse(rec))
				}
				return showRecord(e, out, rec, now)
			})
		}
	},
}

// readRecord reads the record for key, and fails with notFound without
// one.
func readRecord(ctx context.Context, st *store, key string) (*persistence.Record, error) {
	rec, err := st.Get(ctx, key)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, notFound("%s holds no record for %q: it was never written, was released, or expired and was deleted", st, key)
	}
	if err != nil {
		return nil, err
	}
	return rec, checkRecord(st, rec)
}

// showRecord writes rec as a table for people, its response after it.
func showRecord(e *env, out *output, rec *persistence.Record, now time.Time) error {
	t := newTable(e.stdout, e.tableWidth(out))
	t.wrap = true
	describe(t, rec, now)
	body, response := responseText(rec)
	t.row("response", response)
	if rec.ErrorType != "" || rec.ErrorMessage != "" {
		t.row("error type", rec.ErrorType)
		t.row("error message", rec.ErrorMessage)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if body != "" {
		fmt.Fprintf(e.stdout, "\n%s\n", body)
	}
	return nil
}

// describe writes the rows of rec that every command shows.
func describe(t *table, rec *persistence.Record, now time.Time) {
	s := stateOf(rec, now)
	t.row("key", rec.Key)
	if _, tenant, _, ok := core.SplitKey(rec.Key); ok && tenant != "" {
		t.row("tenant", tenant+" (the key's tenant scope: Lambda tenant isolation)")
	}
	t.row("status", string(rec.Status))
	t.row("state", s.name)
	t.row("meaning", s.meaning)
	t.row("expires", when(rec.ExpiresAt, now))
	// A completed record keeps the in-progress expiry of its reservation
	// (DynamoDB), which no longer counts.
	if rec.Status == persistence.StatusInProgress {
		t.row("in progress until", when(rec.InProgressExpiresAt, now))
		if rec.Held {
			t.row("held", "until released: retries are refused past that time, not taken over")
		}
	}
	t.row("owner token", rec.Token)
	t.row("payload hash", orNone(rec.PayloadHash, "no payload validation"))
}

// responseText returns rec's response for people, indented when it is
// JSON, and the row that describes it.
func responseText(rec *persistence.Record) (body, row string) {
	n := len(rec.Response)
	size := strconv.Itoa(n) + " bytes"
	switch {
	case rec.ResponseOmitted:
		return "", "omitted: too large to store"
	case n == 0 && rec.ErrorType != "":
		return "", "none: an error was recorded"
	case n == 0:
		return "", "none"
	case json.Valid(rec.Response):
		var b bytes.Buffer
		_ = json.Indent(&b, rec.Response, "", "  ") // valid: cannot fail
		return b.String(), size + ", JSON:"
	case utf8.Valid(rec.Response):
		return string(rec.Response), size + ", text:"
	}
	return base64.StdEncoding.EncodeToString(rec.Response), size + ", binary, in base64:"
}
