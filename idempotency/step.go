package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// Steps: a function that holds its key runs its side effects as named
// steps. Each step's result is stored in a record of its own under the
// step's key (docs/protocol.md, write a step). An attempt that runs
// after an earlier one failed, or took over its lapsed reservation,
// reads the stored results and runs only the steps that have none.
//
// A step reads its record, runs when there is none, and writes its
// result only if no live record holds the step's key. The first result
// written wins. A late write of an attempt that was taken over neither
// overwrites nor duplicates it. A step's record is completed when it is
// written, and expires one expiry window after it (WithExpiry) like the
// call's record, never before the call's reservation lapses.

// Step runs fn as the step name of the idempotent call that ctx belongs
// to, and returns its result. When an earlier attempt of the call has
// stored the step's result, Step returns that result without running fn.
//
// Results are stored as json.Marshal encodes T, and replays decode them
// with json.Unmarshal into a new T. An error of fn is returned unchanged
// and not stored, so that a retry runs the step again, unless it is
// permanent ([Permanent], [WithPermanentErrors]). A permanent error is
// recorded and replayed as a [*RecordedError].
//
// Step returns an error outside an idempotent call, for a bad name or a
// nil fn. It returns a [*StoreError] when the step's record cannot be
// read, and fn does not run then. It returns a [*PayloadMismatchError]
// when the stored step belongs to another payload, and a [*ReplayError]
// when the stored result does not decode into T. A step whose result
// cannot be stored returns it all the same, and runs again on a retry.
// When the library is off (POWERTOOLS_IDEMPOTENCY_DISABLED), or the
// input has no key, Step only calls fn.
//
// With [WithTransactions], the writes a step stages, or makes in the
// store's transaction, commit with the call and not with the step. A
// retry after a failed call replays the step without them. Keep such
// writes out of steps.
func Step[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	var out T
	h, key, err := stepOf(ctx, name)
	switch {
	case err == nil && fn == nil:
		return out, stepError(name, errors.New("nil function"))
	case err != nil:
		return out, err
	case h == nil:
		out, err = fn(ctx)
		return out, core.Unmark(err)
	}
	resp, replayed, err := h.step(ctx, name, key, func(ctx context.Context) ([]byte, error) {
		var err error
		if out, err = fn(ctx); err != nil {
			return nil, err
		}
		resp, err := json.Marshal(out)
		if err != nil {
			// The side effect has happened: a retry must not run it
			// again for want of a record.
			return nil, Permanent(&ResponseEncodingError{Err: err})
		}
		return resp, nil
	})
	if err != nil || !replayed {
		return out, err
	}
	out = *new(T)
	if err := json.Unmarshal(resp, &out); err != nil {
		return *new(T), &ReplayError{Key: key, Err: err}
	}
	return out, nil
}

// StepKey returns the key of the step name of the idempotent call that
// ctx belongs to: the call's key, "#step=" and the escaped name
// (docs/keys.md). Pass it downstream as the idempotency key of the
// step's own request, a payment provider's say. It returns an error
// outside an idempotent call, for a bad name, and where [Step] only calls
// its function.
func StepKey(ctx context.Context, name string) (string, error) {
	h, key, err := stepOf(ctx, name)
	if err == nil && h == nil {
		err = stepError(name, errWithoutKey)
	}
	return key, err
}

// stepError is the error of a step that cannot have a key: outside an
// idempotent call, or with a bad name. It is a programming error, which no
// caller handles apart from others, so it has no type of its own.
func stepError(name string, err error) error {
	return fmt.Errorf("idempotency: step %q: %w", name, err)
}

// errOutsideCall is why a step outside an idempotent call has no key.
var errOutsideCall = errors.New("not inside a function run by Wrap, Guard.Do or an adapter")

// errWithoutKey is why a step of a function that runs without the
// library has no key.
var errWithoutKey = errors.New("the function runs without idempotency, and its steps have no key")

// stepOf returns the holder of the call that ctx belongs to, and the key
// of its step name. It returns a nil holder and no error for a function
// that runs without the library.
func stepOf(ctx context.Context, name string) (*holder, string, error) {
	if err := core.CheckStepName(name); err != nil {
		return nil, "", stepError(name, err)
	}
	h, ok := ctx.Value(holderKey{}).(*holder)
	switch {
	case ok && h.g != nil:
		return h, core.StepKey(h.rec.Key, name), nil
	case core.StepsOff(ctx):
		return nil, "", nil
	}
	return nil, "", stepError(name, errOutsideCall)
}

// step runs fn as the step name, whose record key is key, of the holder
// h's call: it reads the step's record, and replays it, or runs fn and
// writes the record only if absent. replayed reports a stored result.
func (h *holder) step(ctx context.Context, name, key string, fn func(context.Context) ([]byte, error)) (resp []byte, replayed bool, err error) {
	g, c := h.g, &h.c
	start := time.Now()
	report := func(o Outcome, err error) {
		c.report(ctx, Event{Kind: EventStep, Key: key, Op: name, Err: err, Start: start, Duration: time.Since(start), Outcome: o})
	}
	t := c.now()
	existing, err := g.store.Get(ctx, key)
	c.stored(ctx, "get", t, err)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		existing = nil
	case err != nil:
		err = &StoreError{Op: "get", Key: key, Err: err}
		report(OutcomeStoreError, err)
		return nil, false, err
	}
	if existing != nil && existing.Live(time.Now()) {
		o, err := g.stepAnswer(h, existing)
		report(o, err)
		return existing.Response, err == nil, err
	}

	resp, err = fn(ctx)
	now := time.Now()
	rec := &persistence.Record{
		Key:         key,
		Status:      persistence.StatusCompleted,
		ExpiresAt:   ceilSecond(now.Add(g.cfg.expiry)),
		PayloadHash: h.rec.PayloadHash,
		Token:       h.rec.Token,
		Response:    resp,
	}
	h.mu.Lock()
	until := h.rec.InProgressExpiresAt // renewed by the lease meanwhile
	h.mu.Unlock()
	if rec.ExpiresAt.Before(until) {
		rec.ExpiresAt = ceilSecond(until)
	}
	switch {
	case err != nil && (core.IsPermanent(err) || g.cfg.isPermanent != nil && g.cfg.isPermanent(err)):
		err = core.Unmark(err)
		rec.Response = nil
		rec.ErrorType = errorTypeName(err)
		rec.ErrorMessage = recordedMessage(err.Error())
	case err != nil:
		report(OutcomeHandlerError, err)
		return nil, false, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.finalWriteTimeout)
	t = c.now()
	werr := g.store.Put(wctx, rec, now)
	c.stored(ctx, "put", t, werr)
	var conflict *persistence.ConflictError
	if errors.As(werr, &conflict) && conflict.Existing == nil {
		t = c.now()
		conflict.Existing, werr = g.store.Get(wctx, key)
		c.stored(ctx, "get", t, werr)
	}
	cancel()
	switch {
	case conflict != nil && conflict.Existing != nil && conflict.Existing.Token != rec.Token:
		// Another attempt stored the step first: its result is the
		// step's, for this attempt as for every later one.
		_, err := g.stepAnswer(h, conflict.Existing)
		report(OutcomeFencedOut, err)
		return conflict.Existing.Response, err == nil, err
	case werr != nil && (conflict == nil || conflict.Existing == nil):
		g.cfg.logger.LogAttrs(ctx, slog.LevelError, "idempotency: storing the step's result failed; returning it anyway, and a retry runs the step again",
			slog.String("key", key), slog.Any("error", werr))
	}
	if err != nil {
		report(OutcomeRecordedError, err)
		return nil, false, err
	}
	report(OutcomeNew, werr)
	return resp, false, nil
}

// stepAnswer turns the live record of a step into its answer: the
// outcome to report, and the error to return with its stored result.
func (g *Guard) stepAnswer(h *holder, existing *persistence.Record) (Outcome, error) {
	switch {
	case existing.Status != persistence.StatusCompleted:
		return OutcomeStoreError, &StoreError{Op: "get", Key: existing.Key, Err: errors.New("the record is not a step's")}
	case existing.PayloadHash != h.rec.PayloadHash:
		return OutcomePayloadMismatch, &PayloadMismatchError{Key: existing.Key}
	case existing.ErrorType != "":
		return OutcomeRecordedError, g.recordedError(existing.Key, existing)
	}
	return OutcomeReplay, nil
}
