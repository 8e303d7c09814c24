package grpcgo

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
	"github.com/retrysafe/retrysafe/persistence"
)

// NewServerInterceptor returns a unary server interceptor that runs each
// call with an idempotency key at most once per key over store. It answers
// the call's retries with the first call's response (see the package
// documentation). It fails if store is nil or an option is invalid.
//
//	idem, err := grpcgo.NewServerInterceptor(store,
//		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
//	if err != nil {
//		log.Fatal(err)
//	}
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, idem))
//
// Streaming calls do not go through unary interceptors: they pass
// through, unprotected.
func NewServerInterceptor(store persistence.Store, opts ...grpcidempotency.ServerOption) (grpc.UnaryServerInterceptor, error) {
	e, err := engine.New("grpcgo: NewServerInterceptor", store, opts, statusOf)
	if err != nil {
		return nil, err
	}
	i := &serverInterceptor{e: e, mdKey: e.MetadataKey()}
	return i.intercept, nil
}

type serverInterceptor struct {
	e     *engine.Engine
	mdKey string
}

func (i *serverInterceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	msg := asMessage(req)
	if msg == nil {
		return handler(ctx, req) // not protobuf: nothing to fingerprint
	}
	md, _ := metadata.FromIncomingContext(ctx)
	call := engine.Call{Method: info.FullMethod, Request: msg, Metadata: md.Get(i.mdKey)}
	var (
		resp any
		err  error
	)
	v := i.e.Serve(ctx, &call, func(ctx context.Context) *engine.Result {
		var rec *recorder
		if stream := grpc.ServerTransportStreamFromContext(ctx); stream != nil {
			rec = &recorder{ServerTransportStream: stream}
			ctx = grpc.NewContextWithServerTransportStream(ctx, rec)
		}
		resp, err = handler(ctx, req)
		r := &engine.Result{Response: asMessage(resp), Cause: err}
		if err != nil {
			r.Response, r.Status = nil, statusOfResult(err)
		}
		if rec != nil {
			r.Header, r.Trailer = rec.metadata()
		}
		return r
	})
	switch {
	case v.Pass:
		return handler(ctx, req)
	case v.Own:
		return resp, err
	}
	return replay(ctx, v.Answer)
}

// replay sends an answer of the engine's.
func replay(ctx context.Context, a *engine.Reply) (any, error) {
	if stream := grpc.ServerTransportStreamFromContext(ctx); stream != nil { // else a direct call: no one to tell
		if h := toMD(a.Header); len(h) > 0 {
			_ = stream.SetHeader(h)
		}
		if t := toMD(a.Trailer); len(t) > 0 {
			_ = stream.SetTrailer(t)
		}
	}
	if a.Status != nil {
		return nil, status.ErrorProto(a.Status)
	}
	return a.Response, nil
}

// asMessage returns req as a protocol buffers message, or nil.
func asMessage(req any) proto.Message {
	switch m := req.(type) {
	case proto.Message:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}

// statusOf returns the status of an error that has one.
func statusOf(err error) (*spb.Status, bool) {
	if err == nil {
		return nil, false
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	return st.Proto(), true
}

// statusOfResult returns the status that gRPC sends for a handler's
// error: its own, or UNKNOWN; a context's error that carries no status
// counts as CANCELLED or DEADLINE_EXCEEDED, which are not stored.
func statusOfResult(err error) *spb.Status {
	if st, ok := statusOf(err); ok {
		return st
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Proto()
	}
	return status.Convert(err).Proto()
}

// recorder is the ServerTransportStream of a handler that runs as the
// holder of its key: it records the metadata the handler sends, and
// passes it on.
type recorder struct {
	grpc.ServerTransportStream
	mu              sync.Mutex
	header, trailer metadata.MD
}

func (r *recorder) SetHeader(md metadata.MD) error {
	if err := r.ServerTransportStream.SetHeader(md); err != nil {
		return err
	}
	r.mu.Lock()
	r.header = metadata.Join(r.header, md)
	r.mu.Unlock()
	return nil
}

func (r *recorder) SendHeader(md metadata.MD) error {
	if err := r.ServerTransportStream.SendHeader(md); err != nil {
		return err
	}
	r.mu.Lock()
	r.header = metadata.Join(r.header, md)
	r.mu.Unlock()
	return nil
}

func (r *recorder) SetTrailer(md metadata.MD) error {
	if err := r.ServerTransportStream.SetTrailer(md); err != nil {
		return err
	}
	r.mu.Lock()
	r.trailer = metadata.Join(r.trailer, md)
	r.mu.Unlock()
	return nil
}

// metadata returns what was recorded, in the stored form.
func (r *recorder) metadata() (header, trailer map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fromMD(r.header), fromMD(r.trailer)
}

// fromMD returns md in the stored form: lower-case keys, and the values of
// binary keys in base64.
func fromMD(md metadata.MD) map[string][]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string][]string, len(md))
	for k, vs := range md {
		k = strings.ToLower(k)
		if strings.HasSuffix(k, "-bin") {
			enc := make([]string, len(vs))
			for i, v := range vs {
				enc[i] = base64.StdEncoding.EncodeToString([]byte(v))
			}
			vs = enc
		}
		out[k] = append(out[k], vs...)
	}
	return out
}

// toMD returns the metadata of the stored form m.
func toMD(m map[string][]string) metadata.MD {
	if len(m) == 0 {
		return nil
	}
	md := make(metadata.MD, len(m))
	for k, vs := range m {
		if strings.HasSuffix(k, "-bin") {
			dec := make([]string, 0, len(vs))
			for _, v := range vs {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					b, err = base64.RawStdEncoding.DecodeString(v)
				}
				if err == nil {
					dec = append(dec, string(b))
				}
			}
			vs = dec
		}
		md[k] = vs
	}
	return md
}
