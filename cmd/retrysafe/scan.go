package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// scanFlags are the flags of the commands that read many records.
type scanFlags struct {
	prefix   string
	pageSize int
	rate     float64
	expiry   time.Duration
}

func (f *scanFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.prefix, "prefix", "", "only records whose key starts with `prefix`, such as a function's key prefix")
	fs.IntVar(&f.pageSize, "page-size", 100, "the `records` each request reads at most")
	fs.Float64Var(&f.rate, "rate", 10, "the most `requests` a second the scan sends, to spare the store's capacity; 0 for no limit")
	fs.DurationVar(&f.expiry, "expiry", idempotency.DefaultExpiry, "the `expiry` the function keeps records for (idempotency.WithExpiry; the HTTP adapters' is 24h): "+
		"a record's expiry less this is when it was written")
}

func (f *scanFlags) check() error {
	switch {
	case f.pageSize < 1:
		return usageError("--page-size %d: want at least 1", f.pageSize)
	case f.rate < 0:
		return usageError("--rate %v: want 0 (no limit) or more", f.rate)
	case f.expiry < time.Second:
		return usageError("--expiry %v: want at least a second", f.expiry)
	}
	return nil
}

// errStop ends a scan early.
var errStop = errors.New("stop")

// scan calls each with every record whose key starts with --prefix, until
// each returns errStop, and returns the number of records read. It sends
// at most --rate requests a second, and shows its progress on stderr when
// that is a terminal.
func (f *scanFlags) scan(ctx context.Context, e *env, st *store, each func(*persistence.Record) error) (scanned int, err error) {
	var interval time.Duration
	if f.rate > 0 {
		interval = time.Duration(float64(time.Second) / f.rate)
	}
	next := time.Now().Add(interval) // when the next request may go
	pages, unknownAge := 0, 0
	now := e.now()
	err = st.List(ctx, f.prefix, f.pageSize, func(recs []*persistence.Record) error {
		pages++
		for _, rec := range recs {
			scanned++
			if err := checkRecord(st, rec); err != nil {
				return err
			}
			if writtenAt(rec, f.expiry, now).IsZero() {
				unknownAge++
			}
			if err := each(rec); err != nil {
				return err
			}
		}
		if e.stderrTerminal {
			fmt.Fprintf(e.stderr, "\rscanning %s: %d records in %d pages", st, scanned, pages)
		}
		if interval > 0 {
			if err := sleepUntil(ctx, next); err != nil {
				return err
			}
			next = time.Now().Add(interval)
		}
		return nil
	})
	if e.stderrTerminal && pages > 0 {
		fmt.Fprint(e.stderr, "\r\x1b[K") // the progress line goes once the scan is over
	}
	if unknownAge > 0 {
		fmt.Fprintf(e.stderr, "%d records expire more than --expiry (%s) from now: their function keeps records longer "+
			"(the HTTP adapters, 24h); their age shows as ? until --expiry gives it\n", unknownAge, duration(f.expiry))
	}
	if errors.Is(err, errStop) {
		err = nil
	}
	return scanned, err
}

// sleepUntil waits until t, or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
