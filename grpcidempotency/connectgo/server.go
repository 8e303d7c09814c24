package connectgo

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
	"github.com/retrysafe/retrysafe/persistence"
)

// NewServerInterceptor returns a Connect interceptor for handlers that
// runs each unary call with an idempotency key at most once per key over
// store. It answers the call's retries with the first call's response (see
// the package documentation). It fails if store is nil or an option is
// invalid.
//
//	idem, err := connectgo.NewServerInterceptor(store,
//		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
//	if err != nil {
//		log.Fatal(err)
//	}
//	mux.Handle(ordersv1connect.NewOrdersHandler(svc, connect.WithInterceptors(idem)))
//
// Streaming calls pass through, unprotected; so do the calls of clients,
// when the interceptor is given to one.
func NewServerInterceptor(store persistence.Store, opts ...grpcidempotency.ServerOption) (connect.Interceptor, error) {
	e, err := engine.New("connectgo: NewServerInterceptor", store, opts, statusOf)
	if err != nil {
		return nil, err
	}
	return &serverInterceptor{e: e, mdKey: e.MetadataKey()}, nil
}

type serverInterceptor struct {
	e     *engine.Engine
	mdKey string
}

func (i *serverInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		msg, ok := req.Any().(proto.Message)
		if req.Spec().IsClient || !ok {
			return next(ctx, req)
		}
		call := engine.Call{Method: req.Spec().Procedure, Request: msg, Metadata: req.Header().Values(i.mdKey)}
		var (
			resp connect.AnyResponse
			err  error
		)
		v := i.e.Serve(ctx, &call, func(ctx context.Context) *engine.Result {
			// Headers set through the context (connect.CallInfo) count
			// too, but not those set before the handler ran.
			info, hasInfo := connect.CallInfoForHandlerContext(ctx)
			var header0, trailer0 http.Header
			if hasInfo {
				header0, trailer0 = info.ResponseHeader().Clone(), info.ResponseTrailer().Clone()
			}
			resp, err = next(ctx, req)
			r := &engine.Result{Cause: err}
			header, trailer := http.Header{}, http.Header{}
			if hasInfo {
				add(header, added(info.ResponseHeader(), header0))
				add(trailer, added(info.ResponseTrailer(), trailer0))
			}
			switch {
			case err != nil:
				r.Status = statusOfResult(err)
				var ce *connect.Error
				if errors.As(err, &ce) {
					add(header, ce.Meta())
				}
			case resp != nil:
				r.Response, _ = resp.Any().(proto.Message)
				add(header, resp.Header())
				add(trailer, resp.Trailer())
			}
			r.Header, r.Trailer = stored(header), stored(trailer)
			return r
		})
		switch {
		case v.Pass:
			return next(ctx, req)
		case v.Own:
			return resp, err
		}
		return reply(v.Answer)
	}
}

func (i *serverInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *serverInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// message is the response message of a replay, whose Go type the
// interceptor does not know: connect.Response needs one, and the codecs
// need only a proto.Message, which the message it holds is.
type message struct{ proto.Message }

// reply sends an answer of the engine's.
func reply(a *engine.Reply) (connect.AnyResponse, error) {
	if a.Status != nil {
		ce := connect.NewError(connect.Code(a.Status.GetCode()), errors.New(a.Status.GetMessage()))
		for _, d := range a.Status.GetDetails() {
			if detail, err := connect.NewErrorDetail(d); err == nil {
				ce.AddDetail(detail)
			}
		}
		set(ce.Meta(), a.Header)
		set(ce.Meta(), a.Trailer)
		return nil, ce
	}
	resp := connect.NewResponse(&message{a.Response})
	set(resp.Header(), a.Header)
	set(resp.Trailer(), a.Trailer)
	return resp, nil
}

// statusOf returns the status of a Connect error.
func statusOf(err error) (*spb.Status, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce == nil {
		return nil, false
	}
	st := &spb.Status{Code: int32(ce.Code()), Message: ce.Message()}
	for _, d := range ce.Details() {
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	return st, true
}

// statusOfResult returns the status that Connect sends for a handler's
// error: its own, CANCELLED or DEADLINE_EXCEEDED for a context's error,
// else UNKNOWN.
func statusOfResult(err error) *spb.Status {
	if st, ok := statusOf(err); ok {
		return st
	}
	c := connect.CodeUnknown
	switch {
	case errors.Is(err, context.Canceled):
		c = connect.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		c = connect.CodeDeadlineExceeded
	}
	return &spb.Status{Code: int32(c), Message: err.Error()}
}

// added returns the values of now that were not in before.
func added(now, before http.Header) http.Header {
	if len(before) == 0 {
		return now
	}
	out := http.Header{}
	for k, vs := range now {
		if old := before[k]; len(old) < len(vs) {
			out[k] = vs[len(old):]
		}
	}
	return out
}

// add adds the values of src to dst.
func add(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k], vs...)
	}
}

// stored returns h in the stored form: lower-case keys; binary values
// stay in base64, as Connect carries them.
func stored(h http.Header) map[string][]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		k = strings.ToLower(k)
		out[k] = append(out[k], vs...)
	}
	return out
}

// set adds the stored metadata m to h.
func set(h http.Header, m map[string][]string) {
	for k, vs := range m {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
}
