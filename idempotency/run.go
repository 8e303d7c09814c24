package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// The second half of a call that holds its key: the function runs, its
// lease renewed meanwhile (lease.go), and the key is settled with one
// write of docs/protocol.md: complete, record an error, commit (with the
// writes the function staged), or release. The flight then lands with the
// completed record, or with nothing.

// run calls fn as the holder h of the key, and settles the key with its
// outcome.
func (g *Guard) run(ctx context.Context, c *call, h *holder, fn func(context.Context) ([]byte, error)) (res Result, err error) {
	rec := h.rec
	h.g, h.c = g, *c
	fnCtx := context.WithValue(ctx, holderKey{}, h)
	var (
		staging *persistence.Staging
		tx      persistence.Tx
	)
	switch {
	case g.inTx:
		t := c.now()
		fnCtx, tx, err = g.store.(persistence.TxStore).BeginTx(fnCtx, rec)
		c.stored(ctx, "begin", t, err)
		if err != nil {
			// The function does not run: the key is released, and the call
			// fails with a *StoreError.
			g.release(ctx, c, rec)
			g.flights.land(rec.Key, h.flight, nil, time.Time{})
			return Result{Outcome: OutcomeStoreError}, &StoreError{Op: "begin", Key: rec.Key, Err: err}
		}
	case g.cfg.transactions:
		fnCtx, staging = persistence.NewStagingContext(fnCtx)
	}
	var l *lease
	if d := g.leaseFor(ctx); d > 0 {
		l = g.startLease(ctx, c, h, d)
	}
	var completed *persistence.Record // what the flight lands with
	returned := false
	start := time.Now()
	defer func() {
		if !returned {
			// fn panicked (or called runtime.Goexit): release the key and
			// let the panic go on with its own stack.
			l.stop()
			c.report(ctx, Event{Kind: EventRan, Key: rec.Key, Err: errPanicked, Start: start, Duration: time.Since(start)})
			g.rollback(ctx, tx)
			g.release(ctx, c, rec)
			c.end(ctx, OutcomeHandlerError, errPanicked)
		}
		g.flights.land(rec.Key, h.flight, completed, time.Time{})
	}()
	resp, err := fn(fnCtx)
	returned = true
	l.stop()
	took := time.Since(start)
	g.ran(took)
	c.report(ctx, Event{Kind: EventRan, Key: rec.Key, Err: err, Start: start, Duration: took})
	var writes []any
	if staging != nil {
		writes = staging.Close() // nothing staged from now on is written
	}
	if tx != nil && (err != nil || h.notExecuted.Load()) {
		g.rollback(ctx, tx) // the function's writes go with its error
	}

	switch {
	case h.notExecuted.Load():
		if g.release(ctx, c, rec) == "" {
			return Result{Response: resp, Outcome: OutcomeNotExecuted}, core.Unmark(err)
		}
		return Result{Response: resp, Outcome: OutcomeCompletionFailed}, core.Unmark(err)
	case err != nil && (core.IsPermanent(err) || g.cfg.isPermanent != nil && g.cfg.isPermanent(err)):
		err = core.Unmark(err)
		rec.ErrorType = errorTypeName(err)
		rec.ErrorMessage = recordedMessage(err.Error())
		var o Outcome
		o, completed, _ = g.settle(ctx, c, rec, nil, "record", func(ctx context.Context) error { return g.store.Update(ctx, rec) })
		return Result{Outcome: o}, err
	case err != nil:
		if o := g.release(ctx, c, rec); o != "" {
			return Result{Outcome: o}, err
		}
		return Result{Outcome: OutcomeHandlerError}, err
	}
	write, op := func(ctx context.Context) error { return g.store.Update(ctx, rec) }, "complete"
	switch {
	case tx != nil:
		write, op = func(ctx context.Context) error { return tx.Commit(ctx, rec) }, "commit"
	case len(writes) > 0:
		write, op = func(ctx context.Context) error { return g.store.(persistence.Committer).Commit(ctx, rec, writes) }, "commit"
	}
	o, completed, err := g.settle(ctx, c, rec, resp, op, write)
	if op == "commit" && err != nil {
		// The result belongs to writes that did not commit, or may not
		// have.
		unknown := !errors.Is(err, persistence.ErrFenced) && !errors.Is(err, persistence.ErrCommitCanceled)
		return Result{Outcome: o}, &CommitError{Key: rec.Key, Unknown: unknown, Err: err}
	}
	return Result{Response: resp, Outcome: o}, nil
}

// settle makes rec the completed record of the function's result resp,
// and sends write, the write op ("complete", "record" or "commit") of it.
// It returns the call's outcome; the completed
// record that other calls with the key in this process may answer from
// (the one it stored, or, when storing a result or an error failed, the
// one in hand; nil when the record is not the call's any more, or a
// commit did not apply); and the store's error, nil when the write
// applied. A response too large to store completes the key all the same.
func (g *Guard) settle(ctx context.Context, c *call, rec *persistence.Record, resp []byte, op string, write func(context.Context) error) (Outcome, *persistence.Record, error) {
	rec.Status = persistence.StatusCompleted
	rec.ExpiresAt = ceilSecond(time.Now().Add(g.cfg.expiry))
	rec.Response = resp
	rec.Held = false // a completed record holds its key by its result
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.finalWriteTimeout)
	start := time.Now()
	err := write(wctx)
	cancel()
	request := "update"
	if op == "commit" {
		request = "commit"
	}
	c.stored(ctx, request, start, err)
	c.report(ctx, Event{Kind: EventSettled, Key: rec.Key, Op: op, Err: err, Start: start, Duration: time.Since(start)})
	completed := *rec
	log := g.cfg.logger
	switch {
	case err == nil:
		return OutcomeNew, &completed, nil
	case errors.Is(err, persistence.ErrResponseOmitted):
		log.LogAttrs(ctx, slog.LevelWarn, "idempotency: response too large to store; the key is completed, and retries will get ResponseTooLargeError",
			slog.String("key", rec.Key), slog.Int("response_bytes", len(rec.Response)))
		completed.Response, completed.ResponseOmitted = nil, true
		return OutcomeNew, &completed, nil
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, rec, op)
		return OutcomeFencedOut, nil, err
	case errors.Is(err, persistence.ErrCommitCanceled):
		level, msg := slog.LevelWarn, "idempotency: the staged writes were refused; nothing was written, and the key is released"
		if errors.Is(err, persistence.ErrNoTransactions) {
			level, msg = slog.LevelError, "idempotency: the store cannot run transactions, so no commit can succeed: turn WithTransactions off, or use a store that runs them; nothing was written, and the key is released"
		}
		log.LogAttrs(ctx, level, msg, slog.String("key", rec.Key), slog.Any("error", err))
		g.release(ctx, c, rec)
		return OutcomeNotCommitted, nil, err
	case op == "commit":
		log.LogAttrs(ctx, slog.LevelError, "idempotency: the commit failed and may or may not have happened; the key stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		return OutcomeCompletionFailed, nil, err
	}
	what := "result"
	if op == "record" {
		what = "error"
	}
	log.LogAttrs(ctx, slog.LevelError, "idempotency: storing the "+what+" failed; returning it anyway, the key stays reserved until its in-progress expiry",
		slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
	return OutcomeCompletionFailed, &completed, err
}

// release deletes the call's reservation, so that a retry can run
// (docs/protocol.md, release). It returns the call's outcome when the
// release did not apply ("" when it did).
func (g *Guard) release(ctx context.Context, c *call, rec *persistence.Record) Outcome {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.finalWriteTimeout)
	start := time.Now()
	err := g.store.Delete(wctx, rec.Key, rec.Token)
	cancel()
	c.stored(ctx, "delete", start, err)
	c.report(ctx, Event{Kind: EventSettled, Key: rec.Key, Op: "release", Err: err, Start: start, Duration: time.Since(start)})
	switch {
	case err == nil:
		return ""
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, rec, "release")
		return OutcomeFencedOut
	}
	g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: releasing the key failed; it stays reserved until its in-progress expiry",
		slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
	return OutcomeCompletionFailed
}

// releaseQuietly undoes a reservation whose write failed, in case it landed
// anyway. Nothing is reported: the write failure itself is.
func (g *Guard) releaseQuietly(ctx context.Context, c *call, rec *persistence.Record) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.finalWriteTimeout)
	defer cancel()
	t := c.now()
	err := g.store.Delete(wctx, rec.Key, rec.Token)
	c.stored(ctx, "delete", t, err)
}

// rollback ends tx without writing anything of it; tx may be nil.
func (g *Guard) rollback(ctx context.Context, tx persistence.Tx) {
	if tx == nil {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.finalWriteTimeout)
	defer cancel()
	if err := tx.Rollback(wctx); err != nil {
		// The server ends a transaction whose connection goes away.
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: rolling back the function's transaction failed", slog.Any("error", err))
	}
}

// fencedOut logs a settling write op that the store refused: the record
// is no longer the call's reservation.
func (g *Guard) fencedOut(ctx context.Context, rec *persistence.Record, op string) {
	g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the record is no longer this call's reservation (another call took the key over after this one's in-progress expiry, or the store lost the record); the "+op+" did not apply",
		slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt))
}

// errPanicked is the error observers see for a function that panicked.
var errPanicked = errors.New("idempotency: the function panicked")
