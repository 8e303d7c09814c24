package connectgo

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
)

// NewClientInterceptor returns a Connect interceptor for clients that
// gives each mutating unary call one idempotency key. It sends the call
// again, with the same key, when the answer was lost or says to try again
// later. The package documentation of grpcidempotency says more (Clients).
// It fails if an option is invalid.
//
//	idem, err := connectgo.NewClientInterceptor()
//	if err != nil {
//		log.Fatal(err)
//	}
//	client := ordersv1connect.NewOrdersClient(http.DefaultClient, url, connect.WithInterceptors(idem))
//
// Streaming calls pass through, and so do the calls of handlers, when the
// interceptor is given to one.
func NewClientInterceptor(opts ...grpcidempotency.ClientOption) (connect.Interceptor, error) {
	cfg, err := engine.NewClientConfig("connectgo: NewClientInterceptor", opts)
	if err != nil {
		return nil, err
	}
	return &clientInterceptor{cfg: cfg}, nil
}

type clientInterceptor struct{ cfg *engine.ClientConfig }

func (c *clientInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		msg, ok := req.Any().(proto.Message)
		if !req.Spec().IsClient || !ok {
			return next(ctx, req)
		}
		k, ok, err := c.cfg.Prepare(ctx, req.Spec().Procedure, msg, req.Header().Values(c.cfg.MetadataKey))
		switch {
		case err != nil:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("connectgo: "+err.Error()))
		case !ok:
			return next(ctx, req)
		case k.Metadata:
			// For the call only, as the key field below.
			req.Header().Set(c.cfg.MetadataKey, k.Key)
			defer req.Header().Del(c.cfg.MetadataKey)
		}
		if k.Request != msg {
			// The copy with the key goes in the request for the call
			// only: the caller may send its message again, and must not
			// find this call's key in it.
			field := reflect.ValueOf(req).Elem().FieldByName("Msg") // *connect.Request[T].Msg, a *T
			if !field.IsValid() || !field.CanSet() || !reflect.TypeOf(k.Request).AssignableTo(field.Type()) {
				return nil, connect.NewError(connect.CodeInternal, errors.New("connectgo: the request is not a *connect.Request"))
			}
			field.Set(reflect.ValueOf(k.Request))
			defer field.Set(reflect.ValueOf(msg))
		}
		var resp connect.AnyResponse
		err = c.cfg.Retry.Do(ctx, nil, func() error {
			var err error
			resp, err = next(ctx, req)
			return err
		}, func(err error) *spb.Status { return attemptStatus(ctx, err) })
		if err != nil && !errors.As(err, new(*connect.Error)) {
			// The call's context ended while it waited for a retry.
			return nil, connect.NewError(connect.Code(statusOfResult(err).GetCode()), err)
		}
		return resp, err
	}
}

// attemptStatus returns the status of an attempt's error. While the
// call's own context goes on, an answer that the connection lost is
// UNAVAILABLE, as gRPC reports it, whatever code Connect gave it.
func attemptStatus(ctx context.Context, err error) *spb.Status {
	st := statusOfResult(err)
	if ctx.Err() == nil && lostAnswer(err) {
		st.Code = int32(connect.CodeUnavailable)
	}
	return st
}

// lostAnswer reports whether err is the client's account of a connection
// that failed before the reply ended, not an answer of the server's.
// Connect gives such an error the code of the step that failed: UNKNOWN
// for a message cut short ("read message"), INVALID_ARGUMENT for an
// incomplete envelope. It wraps what the transport saw: a reset, another
// network error, a reply that ended early (io.ErrUnexpectedEOF), or a
// connection closed after HTTP/2's GOAWAY.
func lostAnswer(err error) bool {
	if connect.IsWireError(err) {
		return false
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, new(*net.OpError)) || goAwayClosed(err)
}

// goAwayClosed reports whether err wraps the error of HTTP/2 transports
// (net/http's and golang.org/x/net/http2's) for a connection that closed
// after the server's GOAWAY, with calls that the server had promised to
// finish still open. Its type is unexported in net/http: only its message
// tells it.
func goAwayClosed(err error) bool {
	if err == nil {
		return false
	}
	if strings.HasPrefix(err.Error(), "http2: server sent GOAWAY and closed the connection") {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return goAwayClosed(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if goAwayClosed(e) {
				return true
			}
		}
	}
	return false
}

func (c *clientInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c *clientInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
