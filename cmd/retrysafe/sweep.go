package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

var sweepCommand = &command{
	name:    "sweep",
	args:    "",
	summary: "delete expired records where the store does not: PostgreSQL, DynamoDB without TTL",
	about: `Expired records do no harm (the library treats an expired record as
absent, and the next call with its key takes it over), but they take
space. PostgreSQL has no TTL, and neither has a DynamoDB global table of
multi-Region strong consistency (MRSC): their expired records stay until
something deletes them. sweep deletes the records expired at the time it
starts, --batch-size at a time, at --rate batches a second at most, until
a batch deletes fewer than --batch-size. Records in progress past their
in-progress expiry but not their expiry are kept: their call may still
complete them. Run it on a schedule.

PostgreSQL: each batch is one short transaction (rows that a write holds
are skipped). Every few minutes is a fair schedule.

DynamoDB: sweep reads the table's time to live first (DescribeTimeToLive).
Where it is enabled on the expiry attribute and the table is not MRSC,
DynamoDB deletes expired items itself, within days: sweep says so and
deletes nothing. The other tables are swept: MRSC ones, and those whose
TTL is off or on another attribute. Each batch reads the table from its
start (a Scan, or a Query of the records' partition key with
--sort-key-attr), live records too, and deletes each expired one with a
DeleteItem conditioned on its being expired still, so that a key taken
over meanwhile keeps its record. Hourly or daily, with a large
--batch-size, reads less. On a global table of eventual consistency
(MREC), run it in the Region where the keys are written. It needs
dynamodb:DescribeTimeToLive (without it, it sweeps), dynamodb:Scan or
dynamodb:Query, and dynamodb:DeleteItem.

Redis deletes each record at its expiry: sweep says so and deletes
nothing.`,
	flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		sf := &storeFlags{}
		sf.register(fs)
		sw := &sweepFlags{}
		fs.IntVar(&sw.batchSize, "batch-size", 1000, "the most `records` each batch deletes")
		fs.Float64Var(&sw.rate, "rate", 10, "the most `batches` a second, to spare the database; 0 for no limit")
		out := outputFlag(fs)
		return func(ctx context.Context, e *env, args []string) error {
			switch {
			case len(args) > 0:
				return usageError("sweep takes no arguments, but flags (see 'retrysafe help sweep')")
			case sw.batchSize < 1:
				return usageError("--batch-size %d: want at least 1", sw.batchSize)
			case sw.rate < 0:
				return usageError("--rate %v: want 0 (no limit) or more", sw.rate)
			}
			return sf.use(ctx, e, func(ctx context.Context, st *store) error {
				return sw.run(ctx, e, out, st)
			})
		}
	},
}

type sweepFlags struct {
	batchSize int
	rate      float64
}

func (sw *sweepFlags) run(ctx context.Context, e *env, out *output, st *store) error {
	why, err := st.SelfSweeping(ctx)
	if err != nil {
		return err
	}
	if why != "" {
		if out.json {
			return writeJSON(e.stdout, struct {
				Deleted int64  `json:"deleted"`
				Batches int    `json:"batches"`
				Note    string `json:"note"`
			}{0, 0, "nothing to sweep: " + why})
		}
		fmt.Fprintf(e.stdout, "nothing to sweep: %s\n", why)
		return nil
	}
	var interval time.Duration
	if sw.rate > 0 {
		interval = time.Duration(float64(time.Second) / sw.rate)
	}
	// Expired at the start: records that expire while it runs wait for
	// the next sweep, so that it ends.
	now := e.now()
	var deleted int64
	batches := 0
	for {
		next := time.Now().Add(interval)
		n, err := st.Sweep(ctx, now, sw.batchSize)
		if err != nil {
			if deleted > 0 {
				e.note("%d expired records were deleted before the failure", deleted)
			}
			return err
		}
		batches++
		deleted += n
		if e.stderrTerminal {
			fmt.Fprint(e.stderr, "\r"+fitLine(fmt.Sprintf("sweeping: %d records deleted in %d batches, %s", deleted, batches, st), e.stderrWidth))
		}
		if n < int64(sw.batchSize) {
			break
		}
		if err := sleepUntil(ctx, next); err != nil {
			return err
		}
	}
	if e.stderrTerminal {
		fmt.Fprint(e.stderr, "\r\x1b[K")
	}
	if out.json {
		return writeJSON(e.stdout, struct {
			Deleted int64 `json:"deleted"`
			Batches int   `json:"batches"`
		}{deleted, batches})
	}
	fmt.Fprintf(e.stdout, "deleted %d expired %s from %s, in %d %s of at most %d\n",
		deleted, plural(deleted, "record", "records"), st, batches, plural(int64(batches), "batch", "batches"), sw.batchSize)
	return nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
