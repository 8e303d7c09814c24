package grpcgo_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// fast is a retry budget for tests: many attempts, short backoffs.
var fast = grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{MaxAttempts: 30, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond})

// attempts is a server interceptor, before the idempotency interceptor,
// that sees every attempt: the key it carries, and what it was answered.
// fail, when set, answers an attempt in its place.
type attempts struct {
	mu   sync.Mutex
	seen []attempt
	fail func(n int, method string) error
}

type attempt struct {
	method, field, metadata string
	code                    codes.Code
}

func (a *attempts) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	at := attempt{method: info.FullMethod}
	if r, ok := req.(interface{ GetRequestId() string }); ok {
		at.field = r.GetRequestId()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(grpcidempotency.DefaultMetadataKey); len(v) > 0 {
		at.metadata = v[0]
	}
	a.mu.Lock()
	n := len(a.seen) + 1
	a.mu.Unlock()
	var (
		resp any
		err  error
	)
	if a.fail != nil {
		err = a.fail(n, info.FullMethod)
	}
	if err == nil {
		resp, err = handler(ctx, req)
	}
	at.code = status.Code(err)
	a.mu.Lock()
	a.seen = append(a.seen, at)
	a.mu.Unlock()
	return resp, err
}

func (a *attempts) all() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.seen...)
}

// serveAttempts starts the orders service behind attempts and the
// idempotency interceptor.
func serveAttempts(t *testing.T, svc *orders, a *attempts, opts ...grpcidempotency.ServerOption) string {
	idem, err := grpcgo.NewServerInterceptor(memory.New(), opts...)
	require.NoError(t, err)
	return serveWith(t, svc, grpc.ChainUnaryInterceptor(a.intercept, idem))
}

// dialIdempotent returns a client with the client interceptor of opts.
func dialIdempotent(t *testing.T, addr string, opts ...grpcidempotency.ClientOption) testpb.OrdersClient {
	idem, err := grpcgo.NewClientInterceptor(opts...)
	require.NoError(t, err)
	return dial(t, addr, grpc.WithChainUnaryInterceptor(idem))
}

// The client gives a call with an empty request_id one key, in a copy of
// the request, and sends it again with that key on UNAVAILABLE.
func TestClientRetriesWithOneKey(t *testing.T) {
	svc := newOrders()
	a := &attempts{fail: func(n int, _ string) error {
		if n <= 2 {
			return status.Error(codes.Unavailable, "lost")
		}
		return nil
	}}
	client := dialIdempotent(t, serveAttempts(t, svc, a), fast)
	req := &testpb.CreateOrderRequest{Item: "book"}
	resp, err := client.CreateOrder(t.Context(), req)
	require.NoError(t, err)
	assert.EqualValues(t, 1, resp.GetRun())
	assert.Empty(t, req.GetRequestId(), "the caller's message is not changed")

	seen := a.all()
	require.Len(t, seen, 3)
	assert.Len(t, seen[0].field, 36, "a UUID")
	for _, at := range seen {
		assert.Equal(t, seen[0].field, at.field, "one key for every attempt")
		assert.Empty(t, at.metadata)
	}

	// The same message sent again is another call, with another key.
	_, err = client.CreateOrder(t.Context(), req)
	require.NoError(t, err)
	assert.NotEqual(t, seen[0].field, a.all()[3].field)
	assert.Equal(t, 2, svc.Total())
}

// A request_id that the caller set, and a key from ContextWithKey, are
// kept.
func TestClientKeepsTheCallersKey(t *testing.T) {
	svc := newOrders()
	a := &attempts{}
	client := dialIdempotent(t, serveAttempts(t, svc, a), fast)
	_, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{RequestId: "mine"})
	require.NoError(t, err)
	_, err = client.CreateOrder(grpcidempotency.ContextWithKey(t.Context(), "from-context"), &testpb.CreateOrderRequest{})
	require.NoError(t, err)
	_, err = client.Charge(grpcidempotency.ContextWithKey(t.Context(), "charge-key"), &testpb.ChargeRequest{})
	require.NoError(t, err)
	_, err = client.Charge(grpcidempotency.ContextWithKey(t.Context(), "not\x01ascii"), &testpb.ChargeRequest{})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "refused before it is sent")
	seen := a.all()
	require.Len(t, seen, 3)
	assert.Equal(t, "mine", seen[0].field)
	assert.Equal(t, "from-context", seen[1].field)
	assert.Equal(t, "charge-key", seen[2].metadata, "requests without the field carry it in the metadata")
}

// Calls whose request has no key field get no key, and are not retried,
// unless WithKeyedMethods names their method.
func TestClientKeysOnlyWhatItCanRetrySafely(t *testing.T) {
	svc := newOrders()
	a := &attempts{fail: func(n int, _ string) error {
		if n <= 2 {
			return status.Error(codes.Unavailable, "lost")
		}
		return nil
	}}
	addr := serveAttempts(t, svc, a)
	_, err := dialIdempotent(t, addr, fast).Charge(t.Context(), &testpb.ChargeRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err), "no key, no retry")
	require.Len(t, a.all(), 1)
	assert.Empty(t, a.all()[0].metadata)

	_, err = dialIdempotent(t, addr, fast, grpcidempotency.WithKeyedMethods(testpb.Orders_Charge_FullMethodName)).
		Charge(t.Context(), &testpb.ChargeRequest{})
	require.NoError(t, err)
	seen := a.all()[1:]
	require.Len(t, seen, 2)
	assert.Len(t, seen[0].metadata, 36)
	assert.Equal(t, seen[0].metadata, seen[1].metadata)
}

// A call whose key is in use gets ABORTED with a RetryInfo, and the client
// tries again after its delay, until the first call's response is there.
func TestClientWaitsOutAKeyInUse(t *testing.T) {
	svc := newOrders()
	svc.Hold, svc.Entered = make(chan struct{}), make(chan struct{}, 1)
	aborted := make(chan struct{})
	var once sync.Once
	a := &attempts{}
	idem, err := grpcgo.NewServerInterceptor(memory.New(), grpcidempotency.WithMaxRetryDelay(10*time.Millisecond))
	require.NoError(t, err)
	watch := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if status.Code(err) == codes.Aborted {
			once.Do(func() { close(aborted) })
		}
		return resp, err
	}
	addr := serveWith(t, svc, grpc.ChainUnaryInterceptor(a.intercept, watch, idem))
	client := dialIdempotent(t, addr, grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{MaxAttempts: 1000}))
	req := &testpb.CreateOrderRequest{RequestId: "k"}
	first := make(chan error, 1)
	go func() {
		_, err := client.CreateOrder(t.Context(), req)
		first <- err
	}()
	<-svc.Entered
	second := make(chan *testpb.Order, 1)
	go func() {
		resp, err := client.CreateOrder(t.Context(), req)
		assert.NoError(t, err)
		second <- resp
	}()
	<-aborted
	close(svc.Hold)
	require.NoError(t, <-first)
	assert.EqualValues(t, 1, (<-second).GetRun())
	assert.Equal(t, 1, svc.Total())
	codesSeen := map[codes.Code]int{}
	for _, at := range a.all() {
		codesSeen[at.code]++
	}
	assert.Positive(t, codesSeen[codes.Aborted])
	assert.Equal(t, 2, codesSeen[codes.OK], "the first call, and the retry that got its replay")
}

// The client stops after MaxAttempts, and does not retry what another
// attempt cannot change.
func TestClientBudget(t *testing.T) {
	svc := newOrders()
	var code atomic.Int32
	code.Store(int32(codes.Unavailable))
	a := &attempts{fail: func(int, string) error { return status.Error(codes.Code(code.Load()), "no") }}
	client := dialIdempotent(t, serveAttempts(t, svc, a),
		grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	_, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Len(t, a.all(), 3)

	for _, c := range []codes.Code{codes.Aborted, codes.Internal, codes.InvalidArgument, codes.DeadlineExceeded} {
		code.Store(int32(c))
		before := len(a.all())
		_, err = client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{})
		assert.Equal(t, c, status.Code(err))
		assert.Len(t, a.all(), before+1, "%v: once (ABORTED without a RetryInfo too)", c)
	}
}

// A call whose context ends while the client waits for its next attempt
// ends with the context's code.
func TestClientStopsWithTheCallsContext(t *testing.T) {
	svc := newOrders()
	a := &attempts{fail: func(int, string) error { return status.Error(codes.Unavailable, "no") }}
	client := dialIdempotent(t, serveAttempts(t, svc, a),
		grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Hour, MaxDelay: time.Hour, MaxElapsed: 2 * time.Hour, KeyWindow: 24 * time.Hour}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client.CreateOrder(ctx, &testpb.CreateOrderRequest{})
		done <- err
	}()
	for len(a.all()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	assert.Equal(t, codes.Canceled, status.Code(<-done))
}

// gRPC's own retries (a retryPolicy in the service config) resend an
// attempt with its key, and run inside each attempt of the interceptor:
// with both, attempts multiply.
func TestClientAndGRPCRetryPolicy(t *testing.T) {
	const serviceConfig = `{"methodConfig": [{
		"name": [{"service": "retrysafe.test.orders.v1.Orders"}],
		"retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
			"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	svc := newOrders()
	var fail atomic.Int32
	a := &attempts{fail: func(n int, _ string) error {
		if n <= int(fail.Load()) {
			return status.Error(codes.Unavailable, "lost")
		}
		return nil
	}}
	addr := serveAttempts(t, svc, a)
	dialRetrying := func(maxAttempts int) testpb.OrdersClient {
		idem, err := grpcgo.NewClientInterceptor(grpcidempotency.WithRetry(
			grpcidempotency.RetryPolicy{MaxAttempts: maxAttempts, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
		require.NoError(t, err)
		return dial(t, addr, grpc.WithDefaultServiceConfig(serviceConfig), grpc.WithChainUnaryInterceptor(idem))
	}

	// gRPC's retries alone: the interceptor's MaxAttempts is 1.
	fail.Store(2)
	_, err := dialRetrying(1).CreateOrder(t.Context(), &testpb.CreateOrderRequest{})
	require.NoError(t, err)
	seen := a.all()
	require.Len(t, seen, 3)
	assert.Len(t, seen[0].field, 36)
	assert.Equal(t, seen[0].field, seen[2].field, "gRPC resends the attempt with its key")

	// Both: 2 attempts of the interceptor's, each retried by gRPC up to 3
	// times.
	fail.Store(1 << 20)
	before := len(a.all())
	_, err = dialRetrying(2).CreateOrder(t.Context(), &testpb.CreateOrderRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Len(t, a.all(), before+6)
	assert.Equal(t, 1, svc.Total())
}
