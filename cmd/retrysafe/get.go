package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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
Responses are shown decompressed; -o json prints the record for scripts.
--steps also lists the key's steps (idempotency.Step), which outlive a
release of the key: a retry resumes after them. Listing them reads every
record whose key starts with KEY, a scan on a table without a sort key.`,
	flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		sf := &storeFlags{}
		sf.register(fs)
		out := outputFlag(fs)
		withSteps := fs.Bool("steps", false, "also list the key's steps")
		return func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError("give one key (see 'retrysafe key'), not %d arguments", len(args))
			}
			return sf.use(ctx, e, func(ctx context.Context, st *store) error {
				var steps []*persistence.Record
				if *withSteps {
					var err error
					if steps, err = readSteps(ctx, st, args[0]); err != nil {
						return err
					}
				}
				rec, err := readRecord(ctx, st, args[0])
				if err != nil && (len(steps) == 0 || exitCode(err) != exitNotFound) {
					return err
				}
				now := e.now()
				if out.json {
					j := &getStepsJSON{Steps: []*recordJSON{}}
					if rec != nil {
						j.recordJSON = toJSON(rec, now, time.Time{}).withResponse(rec)
					}
					for _, s := range steps {
						sj := toJSON(s, now, time.Time{}).withResponse(s)
						sj.Step = stepName(args[0], s.Key)
						j.Steps = append(j.Steps, sj)
					}
					if !*withSteps {
						return writeJSON(e.stdout, j.recordJSON)
					}
					return writeJSON(e.stdout, j)
				}
				if rec != nil {
					if err := showRecord(e, out, rec, now); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(e.stdout, "%s holds no record for %q: it was released or expired, and a retry resumes after its steps\n", st, args[0])
				}
				if *withSteps {
					return showSteps(e, out, args[0], steps, now)
				}
				return nil
			})
		}
	},
}

// getStepsJSON is get's JSON output with --steps: the record (absent
// when it was released) and its steps.
type getStepsJSON struct {
	*recordJSON
	Steps []*recordJSON `json:"steps"`
}

// readSteps returns the records of the steps of key, with their
// results, which listings leave out.
func readSteps(ctx context.Context, st *store, key string) ([]*persistence.Record, error) {
	var keys []string
	err := st.List(ctx, key+core.StepMark, 0, func(page []*persistence.Record) error {
		for _, rec := range page {
			keys = append(keys, rec.Key)
		}
		return nil
	})
	steps := make([]*persistence.Record, 0, len(keys))
	for _, k := range keys {
		if err != nil {
			break
		}
		var rec *persistence.Record
		if rec, err = st.Get(ctx, k); err == nil {
			steps = append(steps, rec)
		} else if errors.Is(err, persistence.ErrNotFound) {
			err = nil // expired and deleted since
		}
	}
	return steps, err
}

// stepName returns the name of the step whose key is stepKey, a step of
// key.
func stepName(key, stepKey string) string {
	escaped := strings.TrimPrefix(stepKey, key+core.StepMark)
	if name, err := url.PathUnescape(escaped); err == nil {
		return name
	}
	return escaped
}

// showSteps writes the steps of key as a table, one row a step.
func showSteps(e *env, out *output, key string, steps []*persistence.Record, now time.Time) error {
	fmt.Fprintf(e.stdout, "\nsteps: %d\n", len(steps))
	if len(steps) == 0 {
		return nil
	}
	t := newTable(e.stdout, e.tableWidth(out))
	t.wrap = true
	for _, s := range steps {
		what := stateOf(s, now).name
		if s.ErrorType != "" {
			what += ", error " + s.ErrorType + ": " + s.ErrorMessage
		} else {
			what += ", " + strconv.Itoa(len(s.Response)) + " bytes"
		}
		t.row(stepName(key, s.Key), what+", expires "+when(s.ExpiresAt, now))
	}
	return t.flush()
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
