package grpcgo_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/runs"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/persistence"
)

// orders is the service of the tests. Its side effect is counting the
// runs of each key; it answers with the count, and sets response
// metadata that a replay must carry again.
type orders struct {
	testpb.UnimplementedOrdersServer
	runs.Counter
}

func newOrders() *orders { return &orders{} }

func (o *orders) CreateOrder(ctx context.Context, req *testpb.CreateOrderRequest) (*testpb.Order, error) {
	o.Wait(ctx)
	n := o.Run("create:" + req.GetRequestId())
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-run", strconv.Itoa(n), "x-trace-bin", string([]byte{0, 1, 0xff})))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-done", "run-"+strconv.Itoa(n)))
	if c := codes.Code(req.GetFailCode()); c != codes.OK {
		st, err := status.New(c, fmt.Sprintf("failed in run %d", n)).WithDetails(&errdetails.LocalizedMessage{Locale: "en", Message: "run " + strconv.Itoa(n)})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	return &testpb.Order{Name: "orders/" + req.GetRequestId(), Item: req.GetItem(), Quantity: req.GetQuantity(), Labels: req.GetLabels(), Run: int64(n)}, nil
}

func (o *orders) Charge(ctx context.Context, req *testpb.ChargeRequest) (*testpb.ChargeResponse, error) {
	o.Wait(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	key := md.Get(grpcidempotency.DefaultMetadataKey)
	n := o.Run("charge:" + fmt.Sprint(key))
	return &testpb.ChargeResponse{Charge: "charges/" + req.GetOrder(), Run: int64(n)}, nil
}

func (o *orders) GetOrder(_ context.Context, req *testpb.GetOrderRequest) (*testpb.Order, error) {
	return &testpb.Order{Name: req.GetName()}, nil
}

func (o *orders) WatchOrders(req *testpb.WatchOrdersRequest, stream grpc.ServerStreamingServer[testpb.Order]) error {
	n := o.Run("watch:" + req.GetRequestId())
	for i := range req.GetCount() {
		if err := stream.Send(&testpb.Order{Name: "orders/" + strconv.Itoa(int(i)), Run: int64(n)}); err != nil {
			return err
		}
	}
	return nil
}

// serve starts a gRPC server of svc on a free port of 127.0.0.1, with the
// server interceptor of opts over store, and returns its address.
func serve(t testing.TB, svc testpb.OrdersServer, store persistence.Store, opts ...grpcidempotency.ServerOption) string {
	t.Helper()
	idem, err := grpcgo.NewServerInterceptor(store, opts...)
	require.NoError(t, err)
	return serveWith(t, svc, grpc.ChainUnaryInterceptor(idem))
}

// interceptorOf returns the server interceptor of opts over store, as a
// server option.
func interceptorOf(t testing.TB, store persistence.Store, opts ...grpcidempotency.ServerOption) grpc.ServerOption {
	t.Helper()
	idem, err := grpcgo.NewServerInterceptor(store, opts...)
	require.NoError(t, err)
	return grpc.ChainUnaryInterceptor(idem)
}

// serveWith starts a gRPC server of svc with opts.
func serveWith(t testing.TB, svc testpb.OrdersServer, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	testpb.RegisterOrdersServer(srv, svc)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// dial returns a client of the server at addr.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) testpb.OrdersClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return testpb.NewOrdersClient(conn)
}

// reasonOf returns the reason of the ErrorInfo of err's status, if any.
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// detail returns the detail of type T of err's status.
func detail[T any](err error) (T, bool) {
	for _, d := range status.Convert(err).Details() {
		if v, ok := d.(T); ok {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// withKey returns a context whose outgoing metadata carries key.
func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, grpcidempotency.DefaultMetadataKey, key)
}
