package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/retrysafe/retrysafe/persistence"
)

var statsCommand = &command{
	name:    "stats",
	args:    "",
	summary: "count records by status and state; show the oldest in progress",
	about: `It reads every record (whose key starts with --prefix), page by page, at
--rate requests a second at most, with progress on stderr when it is a
terminal.`,
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
			st, err := sf.open(ctx, e)
			if err != nil {
				return err
			}
			defer st.Close()
			return stats(ctx, e, out, st, scan)
		}
	},
}

// statesShown are the states stats counts, in its table's order.
var statesShown = []state{stateInProgress, stateStuck, stateCompleted, stateExpired, stateOther}

func stats(ctx context.Context, e *env, out *output, st *store, scan *scanFlags) error {
	now := e.now()
	byStatus := map[string]int{}
	byState := map[string]int{}
	var oldest *persistence.Record
	total, err := scan.scan(ctx, e, st, func(rec *persistence.Record) error {
		byStatus[string(rec.Status)]++
		byState[stateOf(rec, now).id]++
		// The earliest expiry was written first, whatever the expiry.
		if rec.Status == persistence.StatusInProgress && (oldest == nil || rec.ExpiresAt.Before(oldest.ExpiresAt) ||
			rec.ExpiresAt.Equal(oldest.ExpiresAt) && rec.Key < oldest.Key) {
			oldest = rec
		}
		return nil
	})
	if err != nil {
		return err
	}
	if out.json {
		var o *recordJSON
		if oldest != nil {
			o = toJSON(oldest, now, writtenAt(oldest, scan.expiry, now))
		}
		return writeJSON(e.stdout, struct {
			Records          int            `json:"records"`
			ByStatus         map[string]int `json:"by_status"`
			ByState          map[string]int `json:"by_state"`
			OldestInProgress *recordJSON    `json:"oldest_in_progress"`
		}{total, byStatus, byState, o})
	}
	t := newTable(e.stdout)
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
		t := newTable(e.stdout)
		t.row("  key", oldest.Key)
		t.row("  state", stateOf(oldest, now).name)
		if w := writtenAt(oldest, scan.expiry, now); !w.IsZero() {
			t.row("  written", when(w, now)+", for an expiry of "+duration(scan.expiry))
		}
		t.row("  in progress until", when(oldest.InProgressExpiresAt, now))
		return t.flush()
	}
	return nil
}

// statusOf returns the stored status of the records in state s.
func statusOf(s state) string {
	switch s {
	case stateInProgress, stateStuck:
		return string(persistence.StatusInProgress)
	case stateCompleted:
		return string(persistence.StatusCompleted)
	case stateExpired:
		return "either"
	}
	return "another"
}
