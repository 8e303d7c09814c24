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

// run calls fn as the holder of the key, and settles the key with its
// outcome.
func (g *Guard) run(ctx context.Context, c *call, h *holder, fn func(context.Context) ([]byte, error)) (Result, error) {
	rec := h.rec
	fnCtx := withRecord(ctx, rec)
	var (
		staging *persistence.Staging
		tx      persistence.Tx
	)
	switch {
	case g.inTx:
		var err error
		if fnCtx, tx, err = g.beginTx(ctx, c, fnCtx, rec); err != nil {
			g.land(rec.Key, h.flight, nil, time.Time{})
			return Result{}, err
		}
	case g.cfg.transactions:
		fnCtx, staging = persistence.NewStagingContext(fnCtx)
	}
	l := g.startLease(ctx, c, h)
	var outcome *persistence.Record
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
			c.end(ctx, errPanicked)
		}
		g.land(rec.Key, h.flight, outcome, time.Time{})
	}()
	resp, err := fn(fnCtx)
	returned = true
	l.stop()
	c.report(ctx, Event{Kind: EventRan, Key: rec.Key, Err: err, Start: start, Duration: time.Since(start)})
	var writes []any
	if staging != nil {
		writes = staging.Close() // nothing staged from now on is written
	}
	if tx != nil && err != nil {
		g.rollback(ctx, tx) // the function's writes go with its error
	}

	switch {
	case err != nil && (core.IsPermanent(err) || g.cfg.isPermanent != nil && g.cfg.isPermanent(err)):
		err = core.Unmark(err)
		outcome, _ = g.recordError(ctx, c, rec, err)
		return Result{}, err
	case err != nil:
		g.release(ctx, c, rec)
		return Result{}, err
	case tx != nil:
		outcome, err = g.commit(ctx, c, rec, resp, func(ctx context.Context) error { return c.storeCommitTx(ctx, tx, rec) })
		if err != nil {
			return Result{}, err
		}
		return Result{Response: resp}, nil
	case len(writes) > 0:
		outcome, err = g.commit(ctx, c, rec, resp, func(ctx context.Context) error { return c.storeCommit(ctx, rec, writes) })
		if err != nil {
			return Result{}, err
		}
		return Result{Response: resp}, nil
	}
	outcome, _ = g.complete(ctx, c, rec, resp)
	return Result{Response: resp}, nil
}

// complete stores the function's result (docs/protocol.md, complete). If
// the write fails the result is still the caller's: it is returned, the
// failure is reported, and the key stays reserved until its in-progress
// expiry (see [Guard.Do]).
func (g *Guard) complete(ctx context.Context, c *call, rec *persistence.Record, resp []byte) (*persistence.Record, error) {
	g.completed(rec, resp)
	return g.settle(ctx, c, rec, completion, func(ctx context.Context) error { return c.storeUpdate(ctx, rec) })
}

// recordError stores a permanent error of the function in place of a
// result (docs/protocol.md, record an error).
func (g *Guard) recordError(ctx context.Context, c *call, rec *persistence.Record, fnErr error) (*persistence.Record, error) {
	g.completed(rec, nil)
	rec.ErrorType = errorTypeName(fnErr)
	rec.ErrorMessage = recordedMessage(fnErr.Error())
	return g.settle(ctx, c, rec, errorRecord, func(ctx context.Context) error { return c.storeUpdate(ctx, rec) })
}

// commit stores the function's result with the writes it made, staged or
// in the store's transaction, in one atomic step (docs/protocol.md,
// commit; WithTransactions). Unlike
// complete, it returns a *CommitError when the commit fails: the result
// belongs to writes that did not happen, or may not have.
func (g *Guard) commit(ctx context.Context, c *call, rec *persistence.Record, resp []byte, write func(context.Context) error) (*persistence.Record, error) {
	g.completed(rec, resp)
	completed, err := g.settle(ctx, c, rec, commitment, write)
	switch {
	case err == nil:
		return completed, nil
	case errors.Is(err, persistence.ErrFenced), errors.Is(err, persistence.ErrCommitCanceled):
		return nil, &CommitError{Key: rec.Key, Err: err}
	}
	return nil, &CommitError{Key: rec.Key, Unknown: true, Err: err}
}

// beginTx begins the store's transaction that the function's writes run
// in, and returns the function's context carrying it. If it cannot, the
// function does not run: the key is released, and the call fails with a
// *StoreError.
func (g *Guard) beginTx(ctx context.Context, c *call, fnCtx context.Context, rec *persistence.Record) (context.Context, persistence.Tx, error) {
	start := c.clock()
	fnCtx, tx, err := g.store.(persistence.TxStore).BeginTx(fnCtx, rec)
	c.request(ctx, "begin", start, err)
	if err != nil {
		g.release(ctx, c, rec)
		c.setOutcome(OutcomeStoreError)
		return nil, nil, &StoreError{Op: "begin", Key: rec.Key, Err: err}
	}
	return fnCtx, tx, nil
}

// rollback ends tx without writing anything of it; tx may be nil.
func (g *Guard) rollback(ctx context.Context, tx persistence.Tx) {
	if tx == nil {
		return
	}
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	if err := tx.Rollback(wctx); err != nil {
		// The server ends a transaction whose connection goes away.
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: rolling back the function's transaction failed", slog.Any("error", err))
	}
}

// completed makes rec the completed record of the function's result: the
// call has no further use for the in-progress one.
func (g *Guard) completed(rec *persistence.Record, resp []byte) {
	rec.Status = persistence.StatusCompleted
	rec.ExpiresAt = ceilSecond(time.Now().Add(g.cfg.expiry))
	rec.Response = resp
	rec.Held = false // a completed record holds its key by its result
}

// A settlement is a write that completes a key: what it is reported as
// when it applies, and what is said of it when it does not.
type settlement struct {
	applied EventKind
	// doing names the write in messages: "not completing it".
	doing string
	// failed is logged when the write fails and its outcome is unknown.
	failed string
	// answers is set when the result in hand answers the call's
	// duplicates even though the write failed: not for a commit, whose
	// result belongs to writes that may not have happened.
	answers bool
}

var (
	completion = settlement{EventCompleted, "completing",
		"storing the result failed; returning it anyway, the key stays reserved until its in-progress expiry", true}
	errorRecord = settlement{EventErrorRecorded, "recording the error of",
		"recording the error failed; returning it anyway, the key stays reserved until its in-progress expiry", true}
	commitment = settlement{EventCompleted, "committing",
		"the commit failed and may or may not have happened; the key stays reserved until its in-progress expiry", false}
)

// settle sends write, the settlement s of rec, and settles the call with
// its outcome. It returns the completed record that other calls with the
// key in this process may answer from: the one it stored, or, when
// storing it failed and s.answers, the result in hand; nil when the
// record is not the call's any more or the store refused the write. Its
// error is the store's, but for a response that was too large to store,
// which completes the key all the same.
func (g *Guard) settle(ctx context.Context, c *call, rec *persistence.Record, s settlement, write func(context.Context) error) (*persistence.Record, error) {
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := write(wctx)
	done := Event{Kind: s.applied, Key: rec.Key, Start: start, Duration: time.Since(start)}
	completed := *rec
	log := g.cfg.logger
	switch {
	case err == nil:
		c.setOutcome(OutcomeNew)
	case errors.Is(err, persistence.ErrResponseOmitted):
		log.LogAttrs(ctx, slog.LevelWarn, "idempotency: response too large to store; the key is completed, and retries will get ResponseTooLargeError",
			slog.String("key", rec.Key), slog.Int("response_bytes", len(rec.Response)))
		done.Kind, done.Err = EventResponseOmitted, err
		c.setOutcome(OutcomeNew)
		completed.Response, completed.ResponseOmitted = nil, true
		err = nil
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, s.doing, done)
		return nil, err
	case errors.Is(err, persistence.ErrCommitCanceled):
		level, msg := slog.LevelWarn, "idempotency: the staged writes were refused; nothing was written, and the key is released"
		if errors.Is(err, persistence.ErrNoTransactions) {
			level, msg = slog.LevelError, "idempotency: the store cannot run transactions, so no commit can succeed: turn WithTransactions off, or use a store that runs them; nothing was written, and the key is released"
		}
		log.LogAttrs(ctx, level, msg, slog.String("key", rec.Key), slog.Any("error", err))
		done.Kind, done.Err = EventCommitCanceled, err
		c.report(ctx, done)
		g.release(ctx, c, rec)
		c.setOutcome(OutcomeNotCommitted)
		return nil, err
	default:
		log.LogAttrs(ctx, slog.LevelError, "idempotency: "+s.failed,
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventCompletionFailed, err
		c.setOutcome(OutcomeCompletionFailed)
		if !s.answers {
			c.report(ctx, done)
			return nil, err
		}
	}
	c.report(ctx, done)
	return &completed, err
}

// release deletes the call's reservation, so that a retry can run
// (docs/protocol.md, release).
func (g *Guard) release(ctx context.Context, c *call, rec *persistence.Record) {
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := c.storeDelete(wctx, rec.Token)
	done := Event{Key: rec.Key, Start: start, Duration: time.Since(start)}
	switch {
	case err == nil:
		done.Kind = EventReleased
		c.setOutcome(OutcomeHandlerError)
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, "releasing", done)
		return
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: releasing the key failed; it stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventReleaseFailed, err
		c.setOutcome(OutcomeCompletionFailed)
	}
	c.report(ctx, done)
}

// releaseQuietly undoes a reservation whose write failed, in case it landed
// anyway. Nothing is reported: the write failure itself is.
func (g *Guard) releaseQuietly(ctx context.Context, c *call, rec *persistence.Record) {
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	_ = c.storeDelete(wctx, rec.Token)
}

// fencedOut reports a settling write, done, that the store refused: the
// record is no longer the call's reservation.
func (g *Guard) fencedOut(ctx context.Context, c *call, rec *persistence.Record, what string, done Event) {
	g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the record is no longer this call's reservation (another call took the key over after this one's in-progress expiry, or the store lost the record); not "+what+" it",
		slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt))
	done.Kind, done.Err = EventFencedOut, persistence.ErrFenced
	c.setOutcome(OutcomeFencedOut)
	c.report(ctx, done)
}

// finalContext returns the context for a settling write: it keeps ctx's
// values but not its cancellation, and has a timeout of its own, so that
// a deadline that has just passed does not lose the write. The timeout is
// the final write timeout, or up to an eighth more: the writes share
// their deadlines (writectx.go).
func (g *Guard) finalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return g.writeDeadlines.context(ctx, time.Now())
}

// errPanicked is the error observers see for a function that panicked.
var errPanicked = errors.New("idempotency: the function panicked")
