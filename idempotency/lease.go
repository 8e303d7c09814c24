package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// A reservation holds its key until the end of its lease. On Lambda, by
// default, the lease is the invocation: it ends at the context's deadline,
// after which the invocation is gone anyway. Without a deadline (servers,
// background jobs), or with WithLease, the lease is a fixed time that the
// call renews while its function runs, a third of the lease before it
// ends, with an Update of the in-progress record fenced on the call's
// token; a lease never ends after the context's deadline. A process that
// dies stops renewing, so its key lapses within one lease.

// leaseFor returns the lease of a call with context ctx, or 0 when the
// reservation lasts until the context's deadline.
func (g *Guard) leaseFor(ctx context.Context) time.Duration {
	if g.cfg.lease > 0 {
		return g.cfg.lease
	}
	if _, ok := ctx.Deadline(); ok {
		return 0
	}
	return defaultLease
}

// leaseEnd returns when a reservation made at now stops holding its key,
// unless renewed.
func (g *Guard) leaseEnd(ctx context.Context, now time.Time) time.Time {
	deadline, hasDeadline := ctx.Deadline()
	lease := g.leaseFor(ctx)
	if lease == 0 {
		return deadline
	}
	end := now.Add(lease)
	if hasDeadline && deadline.Before(end) {
		end = deadline
	}
	return end
}

// lease renews a holder's reservation while its function runs.
type lease struct {
	g     *Guard
	c     call // a copy of the call, to report the renewals
	ctx   context.Context
	h     *holder
	every time.Duration

	mu      sync.Mutex // held while renewing, so that stop waits for it
	timer   *time.Timer
	stopped bool
}

// startLease starts renewing h's reservation, a lease of d: a third of
// d before it ends. No goroutine runs until the first renewal is due.
func (g *Guard) startLease(ctx context.Context, c *call, h *holder, d time.Duration) *lease {
	l := &lease{g: g, c: *c, ctx: ctx, h: h, every: d / 3}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = time.AfterFunc(l.every, l.renew)
	return l
}

// renew extends the reservation by a lease from now, and schedules the
// next renewal. A failure stops the renewals and is reported
// (EventRenewed with its error): the reservation then lapses at the end
// of its current lease, and the function goes on.
func (l *lease) renew() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	g, rec := l.g, l.h.rec
	now := time.Now()
	end := g.leaseEnd(l.ctx, now)
	if !end.After(rec.InProgressExpiresAt) {
		return // the deadline: nothing to extend
	}
	renewed := *rec
	renewed.InProgressExpiresAt = end
	renewed.ExpiresAt = rec.ExpiresAt
	if renewed.ExpiresAt.Before(end) {
		renewed.ExpiresAt = ceilSecond(end)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), g.cfg.finalWriteTimeout)
	err := g.store.Update(wctx, &renewed)
	cancel()
	l.c.stored(l.ctx, "update", now, err)
	l.c.report(l.ctx, Event{Kind: EventRenewed, Key: rec.Key, Err: err, Start: now, Duration: time.Since(now)})
	if err != nil {
		l.stopped = true
		level, what := slog.LevelError, "renewing the reservation failed; it lapses at the end of its lease while the function still runs"
		if errors.Is(err, persistence.ErrFenced) {
			level, what = slog.LevelWarn, "the reservation is no longer this call's (its lease lapsed, and another call took the key over); not renewing it"
		}
		g.cfg.logger.LogAttrs(l.ctx, level, "idempotency: "+what,
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		return
	}
	l.h.mu.Lock()
	rec.InProgressExpiresAt, rec.ExpiresAt = renewed.InProgressExpiresAt, renewed.ExpiresAt
	l.h.mu.Unlock()
	l.h.flight.reserved(end)
	l.timer.Reset(l.every)
}

// stop ends the renewals, waiting for one in progress. It may be called
// on a nil lease, and more than once.
func (l *lease) stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.timer.Stop()
}
