package main

import (
	"context"
	"flag"
	"slices"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

var lsCommand = &command{
	name:    "ls",
	args:    "",
	summary: "list records: by status, stuck, held, older than an age, by key prefix",
	about: `The store is read page by page, at --rate requests a second at most, with
progress on stderr when it is a terminal; the scan stops once --limit
records match. Records are shown oldest first. Records keep no time of
writing: their age is their expiry less --expiry, the expiry the function
keeps records for. Without --expiry it is the library's default, 1h, or,
for records that expire later than an hour from now, the HTTP adapters',
24h.

The table fits the terminal, or 120 columns when the output is not a
terminal: keys are shortened in the middle of their hash. -o wide shows
them whole, and so does -o json.

A record is stuck when it is in progress past its in-progress expiry: the
call that reserved it crashed or timed out, and the next retry with its key
runs the handler again. It is held instead when the function holds such keys
(WithHoldUntilReleased): retries are refused until someone checks what the
call did and runs release.`,
	flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		sf := &storeFlags{}
		sf.register(fs)
		scan := &scanFlags{}
		scan.register(fs)
		l := &lsFlags{}
		fs.StringVar(&l.status, "status", "", "only records of `status` INPROGRESS or COMPLETED")
		fs.BoolVar(&l.stuck, "stuck", false, "only stuck records: in progress past their in-progress expiry")
		fs.BoolVar(&l.held, "held", false, "only held records: in progress past their in-progress expiry, held for release")
		fs.DurationVar(&l.olderThan, "older-than", 0, "only records written longer than `age` ago (see --expiry)")
		fs.IntVar(&l.limit, "limit", 50, "show at most `n` records; 0 for all")
		out := outputFlag(fs)
		return func(ctx context.Context, e *env, args []string) error {
			if len(args) > 0 {
				return usageError("ls takes no arguments, but flags (see 'retrysafe help ls')")
			}
			if err := scan.check(); err != nil {
				return err
			}
			match, err := l.filter(scan.expiry)
			if err != nil {
				return err
			}
			return sf.use(ctx, e, func(ctx context.Context, st *store) error {
				return l.run(ctx, e, out, st, scan, match)
			})
		}
	},
}

// olderThan reports whether rec was written longer than age before now;
// not when the time of writing cannot be told.
func olderThan(rec *persistence.Record, expiry time.Duration, now time.Time, age time.Duration) bool {
	w, _ := writtenAt(rec, expiry, now)
	return !w.IsZero() && now.Sub(w) > age
}

type lsFlags struct {
	status    string
	stuck     bool
	held      bool
	olderThan time.Duration
	limit     int
}

// filter returns the test of the flags' filters, at a time.
func (l *lsFlags) filter(expiry time.Duration) (func(*persistence.Record, time.Time) bool, error) {
	status := persistence.Status(strings.ToUpper(l.status))
	switch {
	case status != "" && status != persistence.StatusInProgress && status != persistence.StatusCompleted:
		return nil, usageError("--status %q: want INPROGRESS or COMPLETED", l.status)
	case l.olderThan < 0:
		return nil, usageError("--older-than %v: want a positive age", l.olderThan)
	case l.limit < 0:
		return nil, usageError("--limit %d: want 0 (all) or more", l.limit)
	}
	return func(rec *persistence.Record, now time.Time) bool {
		return (status == "" || rec.Status == status) &&
			(!l.stuck || stateOf(rec, now) == stateStuck) &&
			(!l.held || stateOf(rec, now) == stateHeld) &&
			(l.olderThan == 0 || olderThan(rec, expiry, now, l.olderThan))
	}, nil
}

func (l *lsFlags) run(ctx context.Context, e *env, out *output, st *store, scan *scanFlags, match func(*persistence.Record, time.Time) bool) error {
	var found []*persistence.Record
	scanned, err := scan.scan(ctx, e, st, func(rec *persistence.Record, now time.Time) error {
		if !match(rec, now) {
			return nil
		}
		found = append(found, rec)
		if len(found) == l.limit {
			return errStop
		}
		return nil
	})
	if err != nil {
		return err
	}
	now := e.now() // after every record was read: none was written later
	slices.SortFunc(found, writeOrder(scan.expiry, now))
	limited := l.limit > 0 && len(found) == l.limit
	if out.json {
		recs := make([]*recordJSON, len(found))
		for i, rec := range found {
			written, _ := writtenAt(rec, scan.expiry, now)
			recs[i] = toJSON(rec, now, written)
		}
		return writeJSON(e.stdout, struct {
			Records      []*recordJSON `json:"records"`
			Scanned      int           `json:"scanned"`
			LimitReached bool          `json:"limit_reached"`
		}{recs, scanned, limited})
	}
	if len(found) == 0 {
		e.note("no records match, of %d read", scanned)
		return nil
	}
	t := newTable(e.stdout, e.tableWidth(out))
	t.keys = 0
	t.row("KEY", "STATUS", "STATE", "WRITTEN", "EXPIRES", "IN PROGRESS UNTIL")
	for _, rec := range found {
		written, until := "?", "-"
		if w, _ := writtenAt(rec, scan.expiry, now); !w.IsZero() {
			written = relative(w, now)
		}
		// A completed record keeps its in-progress expiry, which no
		// longer counts.
		if rec.Status == persistence.StatusInProgress && !rec.InProgressExpiresAt.IsZero() {
			until = relative(rec.InProgressExpiresAt, now)
		}
		t.row(rec.Key, string(rec.Status), stateOf(rec, now).name, written, relative(rec.ExpiresAt, now), until)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if t.shortened {
		e.note("keys shortened to fit %d columns: -o wide shows them whole, and so does -o json", e.tableWidth(out))
	}
	if limited {
		e.note("the first %d matching records, of %d read; --limit 0 shows them all", l.limit, scanned)
	}
	return nil
}
