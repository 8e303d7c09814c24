package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

var statsCommand = &command{
	name:    "stats",
	args:    "",
	summary: "count records by status and state; show the oldest in progress",
	about: `It reads every record (whose key starts with --prefix), page by page, at
--rate requests a second at most, with progress on stderr when it is a
terminal. The age of the oldest record in progress is its expiry less
--expiry (see 'retrysafe help ls').`,
	flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		sf := &storeFlags{}
		sf.register(fs)
		scan := &scanFlags{}
		scan.register(fs)
		out := outputFlag(fs)
		return func(ctx context.Context, e *env, args []string) error {
			if len(args) > 0 {
				return usageError("stats takes no arguments, but flags (see 'retrysafe help stats')")
			}
			if err := scan.check(); err != nil {
				return err
			}
			return sf.use(ctx, e, func(ctx context.Context, st *store) error {
				return stats(ctx, e, out, st, scan)
			})
		}
	},
}

// statesShown are the states stats counts, in its table's order.
var statesShown = []state{stateInProgress, stateStuck, stateHeld, stateCompleted, stateExpired, stateOther}

func stats(ctx context.Context, e *env, out *output, st *store, scan *scanFlags) error {
	byStatus := map[string]int{}
	byState := map[string]int{}
	var inProgress []*persistence.Record
	total, err := scan.scan(ctx, e, st, func(rec *persistence.Record, now time.Time) error {
		byStatus[string(rec.Status)]++
		byState[stateOf(rec, now).id]++
		if rec.Status == persistence.StatusInProgress {
			inProgress = append(inProgress, rec)
		}
		return nil
	})
	if err != nil {
		return err
	}
	now := e.now() // after every record was read: none was written later
	var oldest *persistence.Record
	if len(inProgress) > 0 {
		oldest = slices.MinFunc(inProgress, writeOrder(scan.expiry, now))
	}
	written, expiry := time.Time{}, time.Duration(0)
	if oldest != nil {
		written, expiry = writtenAt(oldest, scan.expiry, now)
	}
	if out.json {
		var o *recordJSON
		if oldest != nil {
			o = toJSON(oldest, now, written)
		}
		return writeJSON(e.stdout, struct {
			Records          int            `json:"records"`
			ByStatus         map[string]int `json:"by_status"`
			ByState          map[string]int `json:"by_state"`
			OldestInProgress *recordJSON    `json:"oldest_in_progress"`
		}{total, byStatus, byState, o})
	}
	t := newTable(e.stdout, e.tableWidth(out))
	t.wrap = true
	t.row("STATE", "RECORDS", "STATUS", "MEANING")
	for _, s := range statesShown {
		n := byState[s.id]
		if n == 0 && s == stateOther {
			continue
		}
		t.row(s.name, strconv.Itoa(n), statusOf(s), s.meaning)
	}
	t.row("total", strconv.Itoa(total))
	if err := t.flush(); err != nil {
		return err
	}
	if oldest != nil {
		fmt.Fprintf(e.stdout, "\noldest in progress (of %d):\n", byStatus[string(persistence.StatusInProgress)])
		t := newTable(e.stdout, e.tableWidth(out))
		t.row("  key", oldest.Key)
		t.row("  state", stateOf(oldest, now).name)
		if !written.IsZero() {
			t.row("  written", when(written, now)+", for an expiry of "+duration(expiry))
		}
		t.row("  in progress until", when(oldest.InProgressExpiresAt, now))
		return t.flush()
	}
	return nil
}

// statusOf returns the stored status of the records in state s.
func statusOf(s state) string {
	switch s {
	case stateInProgress, stateStuck, stateHeld:
		return string(persistence.StatusInProgress)
	case stateCompleted:
		return string(persistence.StatusCompleted)
	case stateExpired:
		return "either"
	}
	return "another"
}
