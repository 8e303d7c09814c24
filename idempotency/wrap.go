package idempotency

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/retrysafe/retrysafe/internal/jsonvalue"
	"github.com/retrysafe/retrysafe/jmespath"
	"github.com/retrysafe/retrysafe/persistence"
)

// Wrap makes h idempotent: it returns a function of the same type, for
// lambda.Start or any caller, that runs h at most once per idempotency key
// and answers retries with the stored result.
//
// The key is selected from the input with WithKey (by default the whole
// input), as encoding/json encodes In; results are stored as encoding/json
// encodes Out, and replays decode them into a new Out. Guard.Do describes
// the state machine: what runs, what is stored, and the errors a call can
// return (*InProgressError, *PayloadMismatchError, *KeyError, *StoreError,
// *StoredError, *ResponseTooLargeError, *ReplayError). Errors returned by h
// itself are returned unchanged, with the value h returned with them.
//
// Wrap checks the options and fails if one is invalid, so that mistakes show
// at cold start. When POWERTOOLS_IDEMPOTENCY_DISABLED is true it returns h
// itself (after checking the options).
func Wrap[In, Out any](h func(context.Context, In) (Out, error), store persistence.Store, opts ...Option) (func(context.Context, In) (Out, error), error) {
	if h == nil {
		return nil, fmt.Errorf("idempotency: Wrap: nil handler")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	var hook func(context.Context, Out, *persistence.Record) Out
	if cfg.responseHook != nil {
		var ok bool
		if hook, ok = cfg.responseHook.(func(context.Context, Out, *persistence.Record) Out); !ok {
			var zero Out
			return nil, fmt.Errorf("idempotency: WithResponseHook: the hook is a %T, but the handler returns %T", cfg.responseHook, zero)
		}
	}
	g, err := newGuard(store, cfg, funcName(h))
	if err != nil {
		return nil, err
	}
	if g.disabled {
		return h, nil
	}
	return newWrapped(h, g, cfg, hook).call, nil
}

// newWrapped returns h wrapped with g, its encoders compiled for In and
// Out.
func newWrapped[In, Out any](h func(context.Context, In) (Out, error), g *Guard, cfg *config, hook func(context.Context, Out, *persistence.Record) Out) *wrapped[In, Out] {
	w := &wrapped[In, Out]{h: h, g: g, keyExpr: cfg.keyExpr, validationExpr: cfg.validationExpr, hook: hook,
		results: jsonvalue.CodecFor[Out]()}
	if cfg.keyExpr == nil {
		w.wholeInput = jsonvalue.CanonicalEncoderFor[In]()
	}
	return w
}

// MustWrap is like Wrap but panics if Wrap fails. It suits package-level
// handler variables and main functions, where a bad option is a programming
// error.
func MustWrap[In, Out any](h func(context.Context, In) (Out, error), store persistence.Store, opts ...Option) func(context.Context, In) (Out, error) {
	wrapped, err := Wrap(h, store, opts...)
	if err != nil {
		panic(err)
	}
	return wrapped
}

type wrapped[In, Out any] struct {
	h              func(context.Context, In) (Out, error)
	g              *Guard
	keyExpr        *jmespath.Expression
	validationExpr *jmespath.Expression
	hook           func(context.Context, Out, *persistence.Record) Out
	// results encodes results and decodes replays as encoding/json does,
	// with functions compiled for Out when Wrap is called.
	results *jsonvalue.Codec[Out]
	// wholeInput encodes the input as the key when there is no key
	// expression.
	wholeInput *jsonvalue.CanonicalEncoder[In]
	// inputs and replays hold zero *In and *Out values: the input to
	// select keys from and the target to decode replays into. Both escape
	// (through reflection and the compiled functions, which are called
	// through function values); pooled ones save an allocation (and, for
	// an event, a kilobyte) per call.
	inputs, replays sync.Pool
}

func (w *wrapped[In, Out]) call(ctx context.Context, in In) (Out, error) {
	var zero Out
	key, payloadHash, err := w.derive(in)
	if err != nil {
		if ke, ok := err.(*KeyError); ok && ke.Err == nil && !w.g.cfg.requireKey {
			w.g.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: no idempotency key in the input; running without idempotency",
				slog.String("key_expression", ke.Expression))
			w.g.observe(ctx, EventUnprotected, "", nil)
			return w.h(ctx, in)
		}
		return zero, err
	}

	if w.g.disabled {
		return w.h(ctx, in)
	}
	rec, res, err := w.g.reserve(ctx, key, payloadHash)
	if err != nil {
		return zero, err
	}
	if rec != nil {
		return w.run(ctx, rec, in)
	}
	replay, err := w.decodeReplay(res.Response)
	if err != nil {
		return zero, &ReplayError{Key: key, Err: err}
	}
	if w.hook != nil {
		replay = w.hook(ctx, replay, res.Record)
	}
	return replay, nil
}

// decodeReplay decodes a stored response into an Out.
func (w *wrapped[In, Out]) decodeReplay(response []byte) (Out, error) {
	target := pooled[Out](&w.replays)
	err := w.results.Unmarshal(response, target)
	replay := *target
	release(&w.replays, target)
	return replay, err
}

// pooled returns a zero *T from pool.
func pooled[T any](pool *sync.Pool) *T {
	if p, ok := pool.Get().(*T); ok {
		return p
	}
	return new(T)
}

// release zeroes *p, so that the pool keeps no maps or strings alive, and
// puts p back in pool.
func release[T any](pool *sync.Pool, p *T) {
	var zero T
	*p = zero
	pool.Put(p)
}

// run calls h as the owner of rec's key. The closure exists only on this
// path, so that replays do not allocate it.
func (w *wrapped[In, Out]) run(ctx context.Context, rec *persistence.Record, in In) (Out, error) {
	var out Out
	_, err := w.g.run(ctx, rec, func(ctx context.Context) ([]byte, error) {
		var herr error
		out, herr = w.h(ctx, in)
		if herr != nil {
			return nil, herr
		}
		resp, err := w.results.Marshal(&out)
		if err != nil {
			// The side effect has happened but its result cannot be stored:
			// record the failure rather than let a retry run it again.
			return nil, Permanent(&ResponseEncodingError{Err: err})
		}
		return resp, nil
	})
	// out is what h returned, with its error if any.
	return out, err
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

// buffers holds the scratch space for canonical encodings of keys.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// derive returns the key and payload hash of in.
func (w *wrapped[In, Out]) derive(in In) (key, payloadHash string, err error) {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	input := pooled[In](&w.inputs)
	defer release(&w.inputs, input)
	*input = in

	if w.keyExpr == nil {
		// The whole input: encode it straight from the Go value.
		if *buf, err = w.wholeInput.Append((*buf)[:0], input); err != nil {
			return "", "", &KeyError{Err: err}
		}
		if jsonvalue.NullOrEmpty(*buf) {
			return "", "", &KeyError{}
		}
	} else {
		if *buf, err = w.keyExpr.AppendCanonical((*buf)[:0], input); err != nil {
			return "", "", &KeyError{Expression: w.keyExpr.String(), Err: err}
		}
		// As in Powertools: null, "", and arrays or objects of nulls
		// only are no key.
		if jsonvalue.NullOrEmpty(*buf) {
			return "", "", &KeyError{Expression: w.keyExpr.String()}
		}
	}
	key = w.g.Key(*buf)

	if w.validationExpr != nil {
		if *buf, err = w.validationExpr.AppendCanonical((*buf)[:0], input); err != nil {
			return "", "", &KeyError{Expression: w.validationExpr.String(), Err: fmt.Errorf("payload validation: %w", err)}
		}
		payloadHash = Fingerprint(*buf)
	}
	return key, payloadHash, nil
}
