package grpcgo_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/connectgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb/testpbconnect"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// connectOrders serves the orders service of the gRPC tests as a Connect
// handler.
type connectOrders struct{ svc *orders }

func (c connectOrders) CreateOrder(ctx context.Context, req *connect.Request[testpb.CreateOrderRequest]) (*connect.Response[testpb.Order], error) {
	o, err := c.svc.CreateOrder(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(o), nil
}

func (connectOrders) Charge(context.Context, *connect.Request[testpb.ChargeRequest]) (*connect.Response[testpb.ChargeResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, nil)
}

func (connectOrders) GetOrder(context.Context, *connect.Request[testpb.GetOrderRequest]) (*connect.Response[testpb.Order], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, nil)
}

func (connectOrders) WatchOrders(context.Context, *connect.Request[testpb.WatchOrdersRequest], *connect.ServerStream[testpb.Order]) error {
	return connect.NewError(connect.CodeUnimplemented, nil)
}

// The gRPC and Connect interceptors, with one prefix and one store, share
// records: a call that ran behind one is replayed behind the other, with
// its metadata.
func TestGRPCAndConnectShareRecords(t *testing.T) {
	store, prefix := memory.New(), idempotency.WithKeyPrefix("orders")
	svc := newOrders()
	grpcClient := dial(t, serve(t, svc, store, grpcidempotency.WithGuardOptions(prefix)))

	idem, err := connectgo.NewServerInterceptor(store, grpcidempotency.WithGuardOptions(prefix))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(testpbconnect.NewOrdersHandler(connectOrders{svc}, connect.WithInterceptors(idem)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	connectClient := testpbconnect.NewOrdersClient(http.DefaultClient, "http://"+ln.Addr().String())

	req := &testpb.CreateOrderRequest{Item: "book", RequestId: "both"}
	var header metadata.MD
	first, err := grpcClient.CreateOrder(t.Context(), req, grpc.Header(&header))
	require.NoError(t, err)
	replay, err := connectClient.CreateOrder(t.Context(), connect.NewRequest(req))
	require.NoError(t, err)
	assert.True(t, proto.Equal(first, replay.Msg))
	assert.True(t, grpcidempotency.Replayed(replay.Header()))
	assert.Equal(t, header.Get("x-run")[0], replay.Header().Get("X-Run"))
	b, err := connect.DecodeBinaryHeader(replay.Header().Get("X-Trace-Bin"))
	require.NoError(t, err)
	assert.Equal(t, header.Get("x-trace-bin")[0], string(b))

	other := &testpb.CreateOrderRequest{Item: "pen", RequestId: "other"}
	first2, err := connectClient.CreateOrder(t.Context(), connect.NewRequest(other))
	require.NoError(t, err)
	var header2 metadata.MD
	replay2, err := grpcClient.CreateOrder(t.Context(), other, grpc.Header(&header2))
	require.NoError(t, err)
	assert.True(t, proto.Equal(first2.Msg, replay2))
	assert.True(t, grpcidempotency.Replayed(header2))
	assert.Equal(t, 2, svc.Total())
}
