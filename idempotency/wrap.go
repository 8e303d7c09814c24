package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// Wrap makes h idempotent. It returns a function of the same type, for
// lambda.Start or any caller. That function runs h at most once per
// idempotency key, and answers retries with the stored result.
//
// The key is selected from the input with [WithKey] (by default the whole
// input), as encoding/json encodes In (docs/keys.md defines keys exactly).
// Results are stored as json.Marshal encodes Out, and replays decode them
// with json.Unmarshal into a new Out. [Guard.Do] describes the state
// machine: what runs, what is stored, and the errors a call can return
// ([*InProgressError], [*PayloadMismatchError], [*KeyError],
// [*StoreError], [*RecordedError], [*ResponseTooLargeError], [*ReplayError]).
// Errors returned by h itself are returned unchanged, with the value h
// returned with them.
//
// Wrap checks the options and fails if one is invalid, so that mistakes
// show at cold start. When POWERTOOLS_IDEMPOTENCY_DISABLED is true it
// returns a function that only calls h, after checking the options. Its
// results and errors are h's own. An error marked with [Permanent] comes
// without the mark.
func Wrap[In, Out any](h func(context.Context, In) (Out, error), store persistence.Store, opts ...WrapOption) (func(context.Context, In) (Out, error), error) {
	cfg, err := newConfig("idempotency: Wrap", opts)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%s: nil handler", cfg.name)
	}
	var hook func(context.Context, Out, *persistence.Record) Out
	if cfg.responseHook != nil {
		var ok bool
		if hook, ok = cfg.responseHook.(func(context.Context, Out, *persistence.Record) Out); !ok {
			var zero Out
			return nil, fmt.Errorf("%s: WithResponseHook: the hook is a %T, but the handler returns %T", cfg.name, cfg.responseHook, zero)
		}
	}
	g, err := newGuard(store, cfg, core.DefaultPrefix(h))
	if err != nil {
		return nil, err
	}
	if g.disabled {
		// The library is off: the handler's own results and errors, with
		// nothing of the library's, not even Permanent's mark.
		return func(ctx context.Context, in In) (Out, error) {
			out, err := h(core.WithoutSteps(ctx), in)
			return out, core.Unmark(err)
		}, nil
	}
	w := &wrapped[In, Out]{h: h, g: g, hook: hook}
	return w.call, nil
}

// Must returns v, or panics with err. It is for package-level handlers
// and main functions. There a bad option is a programming error, and
// should stop the cold start.
//
//	lambda.Start(idempotency.Must(idempotency.Wrap(handler, store)))
//	lambda.Start(idempotency.Must(httpapi.WrapAPIGatewayV2(handler, store)))
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

type wrapped[In, Out any] struct {
	h    func(context.Context, In) (Out, error)
	g    *Guard
	hook func(context.Context, Out, *persistence.Record) Out
}

func (w *wrapped[In, Out]) call(ctx context.Context, in In) (Out, error) {
	g := w.g
	var c call
	ctx = c.begin(ctx, g)
	tenant := ""
	if !g.cfg.acrossTenants {
		tenant = core.TenantOf(ctx)
	}
	key, payloadHash, err := core.Derive(g.prefix, tenant, g.cfg.key, g.cfg.validation, in)
	if de, ok := err.(*core.DeriveError); ok {
		if de.Err == nil && !g.cfg.requireKey {
			g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: no idempotency key in the input; running without idempotency",
				slog.String("key_expression", de.Expression))
			out, err := w.h(core.WithoutSteps(ctx), in)
			c.end(ctx, OutcomeNoKey, err)
			return out, err
		}
		err = &KeyError{Expression: de.Expression, Err: de.Err}
		c.end(ctx, OutcomeNoKey, err)
		var zero Out
		return zero, err
	}
	c.key = key
	// Guard.Do's path, typed.
	var out Out
	h, res, err := g.acquire(ctx, &c, payloadHash)
	switch {
	case h != nil:
		out, res, err = w.run(ctx, &c, h, in)
	case err == nil && res.Outcome == OutcomeReplay:
		if err = json.Unmarshal(res.Response, &out); err != nil {
			out, err = *new(Out), &ReplayError{Key: key, Err: err}
		} else if w.hook != nil {
			out = w.hook(ctx, out, res.Record)
		}
	}
	c.end(ctx, res.Outcome, err)
	return out, err
}

// run calls the handler as the holder of the key, and returns what it
// returned, unless its writes did not commit.
func (w *wrapped[In, Out]) run(ctx context.Context, c *call, h *holder, in In) (Out, Result, error) {
	var out Out
	res, err := w.g.run(ctx, c, h, func(ctx context.Context) ([]byte, error) {
		var herr error
		out, herr = w.h(ctx, in)
		if herr != nil {
			return nil, herr
		}
		resp, err := json.Marshal(out)
		if err != nil {
			// The side effect has happened but its result cannot be
			// stored: record the failure rather than let a retry run it
			// again.
			return nil, Permanent(&ResponseEncodingError{Err: err})
		}
		return resp, nil
	})
	if errors.As(err, new(*CommitError)) {
		// The result belongs to writes that did not commit.
		return *new(Out), res, err
	}
	return out, res, err
}

// ResponseEncodingError is returned, and recorded for retries, when a
// handler succeeded but encoding/json cannot encode its result. The side
// effect is not run again.
type ResponseEncodingError struct{ Err error }

// Error implements error.
func (e *ResponseEncodingError) Error() string {
	return "idempotency: encoding the handler's result: " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ResponseEncodingError) Unwrap() error { return e.Err }
