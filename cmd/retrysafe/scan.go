package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/persistence"
)

// scanFlags are the flags of the commands that read many records.
type scanFlags struct {
	prefix   string
	pageSize int
	rate     float64
	// expiry is the function's, or 0: the library's defaults (see
	// writtenAt).
	expiry time.Duration
}

func (f *scanFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.prefix, "prefix", "", "only records whose key starts with `prefix`, such as a function's key prefix")
	fs.IntVar(&f.pageSize, "page-size", 100, "the `records` each request reads at most")
	fs.Float64Var(&f.rate, "rate", 10, "the most `requests` a second the scan sends, to spare the store's capacity; 0 for no limit")
	fs.DurationVar(&f.expiry, "expiry", 0, "the `expiry` the function keeps records for (idempotency.WithExpiry): "+
		"a record's expiry less this is when it was written (default 1h, the library's, "+
		"or 24h, the HTTP adapters', for records that expire later than an hour from now)")
}

func (f *scanFlags) check() error {
	switch {
	case f.pageSize < 1:
		return usageError("--page-size %d: want at least 1", f.pageSize)
	case f.rate < 0:
		return usageError("--rate %v: want 0 (no limit) or more", f.rate)
	case f.expiry != 0 && f.expiry < time.Second:
		return usageError("--expiry %v: want at least a second", f.expiry)
	}
	return nil
}

// errStop ends a scan early.
var errStop = errors.New("stop")

// scan calls each with every record whose key starts with --prefix, and
// the time it was read at, until each returns errStop, and returns the
// number of records read. It sends at most --rate requests a second, and
// shows its progress on stderr when that is a terminal.
func (f *scanFlags) scan(ctx context.Context, e *env, st *store, each func(rec *persistence.Record, now time.Time) error) (scanned int, err error) {
	var interval time.Duration
	if f.rate > 0 {
		interval = time.Duration(float64(time.Second) / f.rate)
	}
	next := time.Now().Add(interval) // when the next request may go
	pages, unknownAge := 0, 0
	err = st.List(ctx, f.prefix, f.pageSize, func(recs []*persistence.Record) error {
		pages++
		// Every record of the page was written before it was read: a
		// time taken at the scan's start would make those written
		// during the scan look written in the future.
		now := e.now()
		for _, rec := range recs {
			scanned++
			if err := checkRecord(st, rec); err != nil {
				return err
			}
			if t, _ := writtenAt(rec, f.expiry, now); t.IsZero() {
				unknownAge++
			}
			if err := each(rec, now); err != nil {
				return err
			}
		}
		if e.stderrTerminal {
			fmt.Fprint(e.stderr, "\r"+fitLine(fmt.Sprintf("scanning: %d records in %d pages, %s", scanned, pages, st), e.stderrWidth))
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
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil {
		return scanned, err
	}
	switch {
	case unknownAge > 0 && f.expiry > 0:
		e.note("%d records expire more than --expiry (%s) from now: their function keeps records longer, "+
			"and their age shows as ? until --expiry gives it", unknownAge, duration(f.expiry))
	case unknownAge > 0:
		e.note("%d records expire more than %s from now: their function keeps records longer than the library's defaults, "+
			"and their age shows as ? until --expiry gives it", unknownAge, duration(defaultExpiries[len(defaultExpiries)-1]))
	}
	return scanned, nil
}

// fitLine returns line cut to fit a terminal of width columns (0: not
// cut), so that a carriage return goes back to its start: a line that
// wraps would leave its first part behind.
func fitLine(line string, width int) string {
	if width <= 1 || utf8.RuneCountInString(line) < width {
		return line
	}
	return string([]rune(line)[:width-2]) + "…"
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
