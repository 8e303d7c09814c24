// Command grpcorders is the orders service of the gRPC example: a gRPC
// server whose CreateOrder creates an order once per AIP-155 request_id,
// behind grpcgo's server interceptor (package orderserver). With -call, it
// is instead a client that creates an order through the client
// interceptor, which gives the call its request_id and retries it with the
// same one.
//
// The server keeps keys in DynamoDB when IDEMPOTENCY_TABLE names a table
// (the AWS SDK reads its own variables: AWS_REGION,
// AWS_ENDPOINT_URL_DYNAMODB, credentials), else in memory. It listens on
// PORT (default 50051), and stops gracefully on SIGTERM and SIGINT.
//
//	go run ./grpcorders &
//	go run ./grpcorders -call localhost:50051
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/retrysafe/retrysafe/examples/grpcorders/orderserver"
	"github.com/retrysafe/retrysafe/examples/grpcorders/ordersv1"
	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/persistence"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func main() {
	call := flag.String("call", "", "create an order on the server at this address, instead of serving")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	if *call != "" {
		err = createOrder(ctx, *call, os.Stdout)
	} else {
		err = serve(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// serve runs the server until ctx ends.
func serve(ctx context.Context) error {
	store, err := openStore(ctx)
	if err != nil {
		return err
	}
	srv, err := orderserver.NewServer(orderserver.NewService(), store)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ":"+cmp.Or(os.Getenv("PORT"), "50051"))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		srv.GracefulStop() // the calls in flight finish, and complete their keys
	}()
	log.Printf("grpcorders: listening on %s", ln.Addr())
	return srv.Serve(ln)
}

// openStore returns the DynamoDB store of IDEMPOTENCY_TABLE, or a memory
// store.
func openStore(ctx context.Context) (persistence.Store, error) {
	table := os.Getenv("IDEMPOTENCY_TABLE")
	if table == "" {
		return memory.New(), nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	return ddbstore.New(dynamodb.NewFromConfig(cfg), table)
}

// createOrder creates an order on the server at addr through the client
// interceptor, asks for it again with the same request_id, and writes what
// it got to w.
func createOrder(ctx context.Context, addr string, w interface{ Write([]byte) (int, error) }) error {
	idem, err := grpcgo.NewClientInterceptor()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithChainUnaryInterceptor(idem))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := ordersv1.NewOrdersClient(conn)
	// The key of the operation, kept to send it again: here, a new one.
	key := grpcidempotency.NewKey()
	req := &ordersv1.CreateOrderRequest{Customer: "ada", Item: "book", Quantity: 1, RequestId: key}
	for range 2 {
		var header metadata.MD
		order, err := client.CreateOrder(ctx, req, grpc.Header(&header))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %s x%d for %s (replayed: %t)\n", order.GetName(), order.GetItem(), order.GetQuantity(), order.GetCustomer(), grpcidempotency.Replayed(header))
	}
	return nil
}
