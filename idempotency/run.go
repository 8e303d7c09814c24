package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// The end of a call that holds its key: the function runs, and the key is
// completed with its result (or a permanent error), committed with the
// writes it staged (WithTransactions), or released.

// run calls fn as the holder of the key, and completes or releases the
// key; its flight then lands with the completed record, or with nothing.
func (g *Guard) run(ctx context.Context, c *call, h *holder, fn func(context.Context) ([]byte, error)) (Result, error) {
	rec := h.rec
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
			g.release(ctx, c, rec)
			c.end(ctx, errPanicked)
		}
		g.land(rec.Key, h.flight, outcome, time.Time{})
	}()
	fnCtx := withRecord(ctx, rec)
	var staging *persistence.Staging
	if g.cfg.transactions {
		fnCtx, staging = persistence.NewStagingContext(fnCtx)
	}
	resp, err := fn(fnCtx)
	returned = true
	l.stop()
	c.report(ctx, Event{Kind: EventRan, Key: rec.Key, Err: err, Start: start, Duration: time.Since(start)})
	var writes []any
	if staging != nil {
		writes = staging.Close() // nothing staged from now on is written
	}

	if err != nil {
		if core.IsPermanent(err) || g.cfg.isPermanent != nil && g.cfg.isPermanent(err) {
			err = core.Unmark(err)
			outcome = g.complete(ctx, c, rec, nil, err)
		} else {
			g.release(ctx, c, rec)
		}
		return Result{}, err
	}
	if len(writes) > 0 {
		if outcome, err = g.commit(ctx, c, rec, resp, writes); err != nil {
			return Result{}, err
		}
		return Result{Response: resp}, nil
	}
	outcome = g.complete(ctx, c, rec, resp, nil)
	return Result{Response: resp}, nil
}

// commit completes rec with the result resp and the writes the function
// staged, in one atomic step (WithTransactions). It returns the completed
// record, or a *CommitError: then nothing was written, and the key is
// released when a write's own condition failed; or the outcome is unknown,
// and the key stays reserved until its in-progress expiry.
func (g *Guard) commit(ctx context.Context, c *call, rec *persistence.Record, resp []byte, writes []any) (*persistence.Record, error) {
	rec.Status = persistence.StatusCompleted
	rec.ExpiresAt = ceilSecond(time.Now().Add(g.cfg.expiry))
	rec.Response = resp
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := g.store.(persistence.Committer).Commit(wctx, rec, writes)
	c.request(ctx, "commit", rec.Key, c.clockSince(start), err)
	done := Event{Key: rec.Key, Start: start, Duration: time.Since(start)}
	completed := *rec
	switch {
	case err == nil:
		done.Kind = EventCompleted
		c.settle(OutcomeNew)
	case errors.Is(err, persistence.ErrResponseOmitted):
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: response too large to store; the writes committed, and retries will get ResponseTooLargeError",
			slog.String("key", rec.Key), slog.Int("response_bytes", len(resp)))
		done.Kind, done.Err = EventResponseOmitted, err
		c.settle(OutcomeNew)
		completed.Response, completed.ResponseOmitted = nil, true
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, "committing", done)
		return nil, &CommitError{Key: rec.Key, Err: err}
	case errors.Is(err, persistence.ErrCommitCanceled):
		level, msg := slog.LevelWarn, "idempotency: the staged writes were refused; nothing was written, and the key is released"
		if errors.Is(err, persistence.ErrNoTransactions) {
			level, msg = slog.LevelError, "idempotency: the store cannot run transactions, so no commit can succeed: turn WithTransactions off, or use a store that runs them; nothing was written, and the key is released"
		}
		g.cfg.logger.LogAttrs(ctx, level, msg, slog.String("key", rec.Key), slog.Any("error", err))
		done.Kind, done.Err = EventCommitCanceled, err
		c.report(ctx, done)
		g.release(ctx, c, rec)
		c.settle(OutcomeNotCommitted)
		return nil, &CommitError{Key: rec.Key, Err: err}
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: the commit failed and may or may not have happened; the key stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventCompletionFailed, err
		c.report(ctx, done)
		c.settle(OutcomeCompletionFailed)
		return nil, &CommitError{Key: rec.Key, Unknown: true, Err: err}
	}
	c.report(ctx, done)
	return &completed, nil
}

// errPanicked is the error observers see for a function that panicked.
var errPanicked = errors.New("idempotency: the function panicked")

// finalContext returns the context for a completion or release write: it
// keeps ctx's values but not its cancellation, and has a timeout of its
// own, so that a deadline that has just passed does not lose the write.
func (g *Guard) finalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), g.cfg.finalWriteTimeout)
}

// complete stores the result (or recorded error) of the invocation that
// owns rec. It returns the completed record that other calls with the key
// in this process may answer from: the one it stored, or, when storing it
// failed, the result in hand, which answers concurrent duplicates of the
// call as well as the store would have; nil when another invocation took
// the key over.
//
// rec becomes the completed record: the invocation has no further use for
// the in-progress one.
func (g *Guard) complete(ctx context.Context, c *call, rec *persistence.Record, resp []byte, handlerErr error) *persistence.Record {
	rec.Status = persistence.StatusCompleted
	rec.ExpiresAt = ceilSecond(time.Now().Add(g.cfg.expiry))
	rec.Response = resp
	kind := EventCompleted
	if handlerErr != nil {
		rec.ErrorType = errorTypeName(handlerErr)
		rec.ErrorMessage = recordedMessage(handlerErr.Error())
		kind = EventErrorRecorded
	}
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := c.storeUpdate(wctx, rec)
	done := Event{Key: rec.Key, Start: start, Duration: time.Since(start)}
	completed := *rec
	switch {
	case err == nil:
		done.Kind = kind
		c.settle(OutcomeNew)
	case errors.Is(err, persistence.ErrResponseOmitted):
		g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: response too large to store; retries will get ResponseTooLargeError",
			slog.String("key", rec.Key), slog.Int("response_bytes", len(resp)))
		done.Kind, done.Err = EventResponseOmitted, err
		c.settle(OutcomeNew)
		completed.Response, completed.ResponseOmitted = nil, true
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, "completing", done)
		return nil
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: storing the result failed; returning it anyway, the key stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventCompletionFailed, err
		c.settle(OutcomeCompletionFailed)
	}
	c.report(ctx, done)
	return &completed
}

// release deletes the record of the invocation that owns rec, so that a
// retry can run.
func (g *Guard) release(ctx context.Context, c *call, rec *persistence.Record) {
	wctx, cancel := g.finalContext(ctx)
	defer cancel()
	start := time.Now()
	err := c.storeDelete(wctx, rec.Key, rec.Token)
	done := Event{Key: rec.Key, Start: start, Duration: time.Since(start)}
	switch {
	case err == nil:
		done.Kind = EventReleased
		c.settle(OutcomeHandlerError)
	case errors.Is(err, persistence.ErrFenced):
		g.fencedOut(ctx, c, rec, "releasing", done)
		return
	default:
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: releasing the key failed; it stays reserved until its in-progress expiry",
			slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt), slog.Any("error", err))
		done.Kind, done.Err = EventReleaseFailed, err
		c.settle(OutcomeCompletionFailed)
	}
	c.report(ctx, done)
}

// releaseQuietly undoes a reservation whose write failed, in case it landed
// anyway. Nothing is reported: the write failure itself is.
func (c *call) releaseQuietly(ctx context.Context, rec *persistence.Record) {
	wctx, cancel := c.g.finalContext(ctx)
	defer cancel()
	_ = c.storeDelete(wctx, rec.Key, rec.Token)
}

// fencedOut reports a completion or release write, done, that the store
// refused.
func (g *Guard) fencedOut(ctx context.Context, c *call, rec *persistence.Record, what string, done Event) {
	g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: the record no longer carries this invocation's token (another invocation took the key over after this one's in-progress expiry, or the store lost the record); not "+what+" it",
		slog.String("key", rec.Key), slog.Time("in_progress_expires_at", rec.InProgressExpiresAt))
	done.Kind, done.Err = EventFencedOut, persistence.ErrFenced
	c.settle(OutcomeFencedOut)
	c.report(ctx, done)
}
