package httpapi

import (
	"context"
	"fmt"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// binding connects the engine to one pair of Lambda event types.
type binding[Req, Resp any] struct {
	// name is the adapter's name, for errors.
	name string
	// view returns the normalised request of an event.
	view func(*Req) Request
	// save returns what a replay needs of a response.
	save func(*Resp) response
	// load returns the response event for a stored or problem response.
	load func(*response) Resp
}

// wrap checks the options, builds the engine and returns the adapter for
// h.
func wrap[Req, Resp any](b *binding[Req, Resp], h func(context.Context, Req) (Resp, error), store persistence.Store, opts []idempotency.HandlerOption) (func(context.Context, Req) (Resp, error), error) {
	name := "httpapi: " + b.name
	if h == nil {
		return nil, fmt.Errorf("%s: nil handler", name)
	}
	// The default prefix is the one idempotency.Wrap would give h.
	e, err := newEngine(name, lambdaEntry, store, core.DefaultPrefix(h), opts)
	if err != nil {
		return nil, err
	}
	if core.Disabled() {
		// The library is off: the handler's own results and errors, with
		// nothing of the library's, not even idempotency.Permanent's mark.
		return func(ctx context.Context, event Req) (Resp, error) {
			out, err := h(core.WithoutSteps(ctx), event)
			return out, core.Unmark(err)
		}, nil
	}
	return func(ctx context.Context, event Req) (Resp, error) {
		return serve(ctx, e, b, h, event)
	}, nil
}

// serve answers one event.
func serve[Req, Resp any](ctx context.Context, e *engine, b *binding[Req, Resp], h func(context.Context, Req) (Resp, error), event Req) (Resp, error) {
	r := b.view(&event)
	var out Resp // what h returned, when it ran
	v := e.handle(ctx, &r, func(ctx context.Context) (*response, error) {
		var err error
		if out, err = h(ctx, event); err != nil {
			return nil, err
		}
		resp := b.save(&out)
		return &resp, nil
	})
	switch {
	case v.pass:
		return h(core.WithoutSteps(ctx), event)
	case v.answer != nil:
		return b.load(v.answer), nil
	case v.own:
		return out, v.err
	}
	var zero Resp
	return zero, v.err
}
