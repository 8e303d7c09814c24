package grpcgo_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/internal/testing/cpubench"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// What the server interceptor adds to a call, on the memory store:
//
//   - BenchmarkServerInterceptor calls the interceptor in the process,
//     without a connection: its own CPU time and allocations per call.
//   - BenchmarkCall makes calls over a gRPC connection on 127.0.0.1, one
//     at a time, to a server without the interceptor (plain) and with it:
//     ns/op is the latency of a call, and cpu-ns/op the CPU time of the
//     process (client and server) per call.
//
// Each has three cases: plain (no interceptor), new (a new key every
// call: the handler runs, and its response is stored) and replay (one
// key: every call after the first is a replay).

// quiet is a handler that does nothing: the cost measured is the
// interceptor's.
type quiet struct {
	testpb.UnimplementedOrdersServer
}

func (quiet) CreateOrder(_ context.Context, req *testpb.CreateOrderRequest) (*testpb.Order, error) {
	return &testpb.Order{Name: "orders/" + req.GetRequestId(), Item: req.GetItem(), Quantity: req.GetQuantity()}, nil
}

func benchRequest(key string) *testpb.CreateOrderRequest {
	return &testpb.CreateOrderRequest{Parent: "shops/1", Item: "a book of some length", Quantity: 3,
		Labels: map[string]string{"channel": "web", "campaign": "spring"}, RequestId: key}
}

func BenchmarkServerInterceptor(b *testing.B) {
	idem, err := grpcgo.NewServerInterceptor(memory.New())
	require.NoError(b, err)
	info := &grpc.UnaryServerInfo{FullMethod: testpb.Orders_CreateOrder_FullMethodName}
	handler := func(ctx context.Context, req any) (any, error) {
		return quiet{}.CreateOrder(ctx, req.(*testpb.CreateOrderRequest))
	}
	plain := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(ctx, req)
	}
	for _, bc := range []struct {
		name        string
		interceptor grpc.UnaryServerInterceptor
		key         func(i int) string
	}{
		{"plain", plain, func(i int) string { return "plain-" + strconv.Itoa(i) }},
		{"new", idem, func(i int) string { return "new-" + strconv.Itoa(i) }},
		{"replay", idem, func(int) string { return "replay" }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			loop(b, func(i int) error {
				_, err := bc.interceptor(b.Context(), benchRequest(bc.key(i)), info, handler)
				return err
			})
		})
	}
}

func BenchmarkCall(b *testing.B) {
	idem, err := grpcgo.NewServerInterceptor(memory.New())
	require.NoError(b, err)
	plain := dial(b, serveWith(b, quiet{}))
	guarded := dial(b, serveWith(b, quiet{}, grpc.ChainUnaryInterceptor(idem)))
	for _, bc := range []struct {
		name   string
		client testpb.OrdersClient
		key    func(i int) string
	}{
		{"plain", plain, func(i int) string { return "plain-" + strconv.Itoa(i) }},
		{"new", guarded, func(i int) string { return "new-" + strconv.Itoa(i) }},
		{"replay", guarded, func(int) string { return "replay" }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			loop(b, func(i int) error {
				_, err := bc.client.CreateOrder(b.Context(), benchRequest(bc.key(i)))
				return err
			})
		})
	}
}

// loop runs op once per iteration of b, numbered from 1, and reports the
// process's CPU time per op, which counts the server's goroutines too.
func loop(b *testing.B, op func(i int) error) {
	b.ReportAllocs()
	i := 0
	cpu := cpubench.ProcessCPU()
	for b.Loop() {
		i++
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpubench.ProcessCPU()-cpu)/float64(i), "cpu-ns/op")
}
