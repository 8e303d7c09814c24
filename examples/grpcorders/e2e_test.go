package main

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/examples/grpcorders/orderserver"
	"github.com/retrysafe/retrysafe/examples/grpcorders/ordersv1"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// start starts the server on a free port of 127.0.0.1.
func start(t *testing.T) (*orderserver.Service, string) {
	svc := orderserver.NewService()
	srv, err := orderserver.NewServer(svc, memory.New())
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return svc, ln.Addr().String()
}

// The client creates one order, and its second call with the same
// request_id is a replay.
func TestCreateOrderOnce(t *testing.T) {
	svc, addr := start(t)
	var out strings.Builder
	require.NoError(t, createOrder(t.Context(), addr, &out))
	assert.Equal(t, "orders/1: book x1 for ada (replayed: false)\norders/1: book x1 for ada (replayed: true)\n", out.String())
	assert.Equal(t, 1, svc.Len())
}

// CreateOrder requires a request_id; a refused request is not stored, so
// that the client can fix it and send it again with its request_id.
func TestCreateOrderNeedsARequestID(t *testing.T) {
	svc, addr := start(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := ordersv1.NewOrdersClient(conn)
	_, err = client.CreateOrder(t.Context(), &ordersv1.CreateOrderRequest{Customer: "ada", Item: "book", Quantity: 1})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	_, err = client.CreateOrder(t.Context(), &ordersv1.CreateOrderRequest{Customer: "ada", Item: "book", RequestId: "r1"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "no quantity")
	// MarkNotExecuted released the key: the fixed request runs with it.
	_, err = client.CreateOrder(t.Context(), &ordersv1.CreateOrderRequest{Customer: "ada", Item: "book", Quantity: 1, RequestId: "r1"})
	require.NoError(t, err)
	assert.Equal(t, 1, svc.Len())
}
