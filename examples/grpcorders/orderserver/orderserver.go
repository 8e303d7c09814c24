// Package orderserver is the orders service of the gRPC example: its
// CreateOrder creates an order once per AIP-155 request_id, behind
// the server interceptor of grpcidempotency's package grpcgo.
package orderserver

import (
	"context"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/examples/grpcorders/ordersv1"
	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// Service is the orders service. Its orders live in memory: the side
// effect that must happen once per request_id.
type Service struct {
	ordersv1.UnimplementedOrdersServer

	mu     sync.Mutex
	orders map[string]*ordersv1.Order
}

// NewService returns a Service without orders.
func NewService() *Service { return &Service{orders: map[string]*ordersv1.Order{}} }

// CreateOrder creates an order. Behind the interceptor it runs once per
// request_id: retries get the order of the first call.
func (s *Service) CreateOrder(ctx context.Context, req *ordersv1.CreateOrderRequest) (*ordersv1.Order, error) {
	if req.GetCustomer() == "" || req.GetItem() == "" || req.GetQuantity() <= 0 {
		// Nothing happened: the client may fix the request and send it
		// again with its request_id.
		idempotency.MarkNotExecuted(ctx)
		return nil, status.Error(codes.InvalidArgument, "customer, item and a positive quantity are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &ordersv1.Order{
		Name:     "orders/" + strconv.Itoa(len(s.orders)+1),
		Customer: req.GetCustomer(),
		Item:     req.GetItem(),
		Quantity: req.GetQuantity(),
	}
	s.orders[o.Name] = o
	return o, nil
}

// GetOrder returns an order.
func (s *Service) GetOrder(_ context.Context, req *ordersv1.GetOrderRequest) (*ordersv1.Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no order %q", req.GetName())
	}
	return o, nil
}

// Len returns how many orders there are.
func (s *Service) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders)
}

// NewServer returns a gRPC server of svc whose CreateOrder requires a
// request_id and runs once per request_id, over store. Keys are kept for a
// day under the prefix "orders".
func NewServer(svc ordersv1.OrdersServer, store persistence.Store, opts ...grpc.ServerOption) (*grpc.Server, error) {
	idem, err := grpcgo.NewServerInterceptor(store,
		grpcidempotency.WithGuardOptions(
			idempotency.WithKeyPrefix("orders"),
			idempotency.WithExpiry(24*time.Hour),
		),
		grpcidempotency.WithMethodPolicy(ordersv1.Orders_CreateOrder_FullMethodName, grpcidempotency.Policy{RequireKey: true}),
	)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(idem))...)
	ordersv1.RegisterOrdersServer(srv, svc)
	return srv, nil
}
