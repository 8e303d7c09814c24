package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

var releaseCommand = &command{
	name:    "release",
	args:    "KEY",
	summary: "delete a record, if it is still the one shown, so that a retry runs again",
	about: `Releasing a key deletes its record: the next retry with the key runs the
handler again. Release a key in progress only when the call that holds it
is gone (it crashed; it is not running any more) and its side effect did
not happen or may happen again; release a completed key (--force) only to
run its side effect again.

The record is read and shown, then deleted only if it is still that record:
the same status, owner token and expiry times. If it changed meanwhile (the
call completed, renewed its lease, or another call took the key over),
nothing is deleted and the exit code is 4. --token and --status check the
record against the one you saw with get. On a terminal, release asks before
it deletes (Ctrl-C at the question ends it, exit code 130); --yes is for
scripts, which it requires. --timeout bounds the read and the delete, each,
not the wait for the answer.`,
	flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		sf := &storeFlags{}
		sf.register(fs)
		r := &releaseFlags{}
		fs.StringVar(&r.token, "token", "", "release only if the record's owner token is `token` (the one get showed)")
		fs.StringVar(&r.status, "status", "", "release only if the record's status is `status`, INPROGRESS or COMPLETED")
		fs.BoolVar(&r.force, "force", false, "release a completed record too: its side effect runs again on the next retry")
		fs.BoolVar(&r.yes, "yes", false, "do not ask for confirmation")
		out := outputFlag(fs)
		return func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError("give one key, not %d arguments", len(args))
			}
			if !r.yes && !e.stdinTerminal {
				return usageError("release asks for confirmation on a terminal; give --yes to release without asking")
			}
			openCtx, cancel := sf.deadline(ctx)
			defer cancel()
			st, err := sf.open(openCtx, e)
			if err != nil {
				return err
			}
			defer st.Close()
			return r.run(ctx, e, out, sf, st, args[0])
		}
	},
}

type releaseFlags struct {
	token, status string
	force, yes    bool
}

const releaseWarning = "Releasing the key deletes its record: the next retry with this key runs the handler again.\n" +
	"If the call that holds it is still running, or its side effect happened, the side effect happens twice.\n"

func (r *releaseFlags) run(ctx context.Context, e *env, out *output, sf *storeFlags, st *store, key string) error {
	readCtx, cancel := sf.deadline(ctx)
	defer cancel()
	rec, err := readRecord(readCtx, st, key)
	if err != nil {
		return err
	}
	now := e.now()
	s := stateOf(rec, now)
	switch {
	case r.token != "" && rec.Token != r.token:
		return refused("not released: the record changed: its owner token is %s, not %s (another call took the key over)", rec.Token, r.token)
	case r.status != "" && !strings.EqualFold(string(rec.Status), r.status):
		return refused("not released: the record changed: its status is %s, not %s", rec.Status, strings.ToUpper(r.status))
	case rec.Status == persistence.StatusCompleted && s != stateExpired && !r.force:
		return refused("not released: the record is completed (%s): releasing it runs its side effect again on the next retry; give --force to release it all the same", s.meaning)
	}

	if !r.yes {
		t := newTable(e.stderr, tableWidth(out, e.stderrWidth))
		t.wrap = true
		describe(t, rec, now)
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "\n%sRelease %s? [y/N] ", releaseWarning, rec.Key)
		answer, err := readLine(ctx, e.stdin)
		if err != nil {
			fmt.Fprintln(e.stderr) // Ctrl-C: the shell's prompt on a line of its own
			return err
		}
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return refused("not released")
		}
	}

	deleteCtx, cancel := sf.deadline(ctx)
	defer cancel()
	switch err := st.DeleteRecord(deleteCtx, rec); {
	case errors.Is(err, persistence.ErrChanged):
		return refused("not released: the record changed since it was read (the call completed, renewed its lease, or another call took the key over); nothing was deleted: see 'retrysafe get %s'", rec.Key)
	case errors.Is(err, persistence.ErrNotFound):
		return notFound("not released: the record is gone already (released, or expired and deleted)")
	case err != nil:
		return err
	}
	if out.json {
		return writeJSON(e.stdout, struct {
			Released *recordJSON `json:"released"`
		}{toJSON(rec, now, time.Time{})})
	}
	fmt.Fprintf(e.stdout, "released %s (it was %s): the next retry with this key runs the handler again\n", rec.Key, s.name)
	return nil
}
