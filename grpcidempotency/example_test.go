package grpcidempotency_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// orders creates orders: its side effect is counting their runs.
type orders struct {
	testpb.UnimplementedOrdersServer
	mu   sync.Mutex
	runs int
}

func (o *orders) CreateOrder(_ context.Context, req *testpb.CreateOrderRequest) (*testpb.Order, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runs++
	return &testpb.Order{Name: "orders/" + req.GetRequestId(), Item: req.GetItem(), Run: int64(o.runs)}, nil
}

// A gRPC server whose calls with a request_id run once per key, and a
// client that gives its calls one key each and retries them with it.
func Example() {
	// The server: the interceptor runs each call with a request_id once.
	idem, err := grpcgo.NewServerInterceptor(memory.New(),
		grpcidempotency.WithGuardOptions(idempotency.WithKeyPrefix("orders")))
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idem))
	testpb.RegisterOrdersServer(srv, &orders{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	// The client: the interceptor gives calls with an empty request_id a
	// key, and retries them with it.
	retry, err := grpcgo.NewClientInterceptor()
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithChainUnaryInterceptor(retry))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewOrdersClient(conn)

	// The same request, with its key, twice: the second is a replay.
	ctx := grpcidempotency.ContextWithKey(context.Background(), "8e03978e-40d5-43e8-bc93-6894a57f9324")
	for range 2 {
		var header metadata.MD
		order, err := client.CreateOrder(ctx, &testpb.CreateOrderRequest{Item: "book", Quantity: 1}, grpc.Header(&header))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s, run %d, replayed: %t\n", order.GetName(), order.GetRun(), grpcidempotency.Replayed(header))
	}
	// Output:
	// orders/8e03978e-40d5-43e8-bc93-6894a57f9324, run 1, replayed: false
	// orders/8e03978e-40d5-43e8-bc93-6894a57f9324, run 1, replayed: true
}
