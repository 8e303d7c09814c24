package connectgo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/connectgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/lossyh2"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/runs"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb/testpbconnect"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/internal/testing/lossyproxy"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func TestMain(m *testing.M) { backends.Main(m) }

// orders is the service of the tests, as the gRPC interceptor's tests
// have it: it counts the runs of each key and answers with the count,
// with response headers and trailers that a replay must carry again.
type orders struct{ runs.Counter }

func newOrders() *orders { return &orders{} }

func (o *orders) CreateOrder(ctx context.Context, req *connect.Request[testpb.CreateOrderRequest]) (*connect.Response[testpb.Order], error) {
	o.Wait(ctx)
	n := o.Run("create:" + req.Msg.GetRequestId())
	if c := connect.Code(req.Msg.GetFailCode()); c != 0 {
		ce := connect.NewError(c, fmt.Errorf("failed in run %d", n))
		d, err := connect.NewErrorDetail(&errdetails.LocalizedMessage{Locale: "en", Message: "run " + strconv.Itoa(n)})
		if err != nil {
			return nil, err
		}
		ce.AddDetail(d)
		ce.Meta().Set("X-Run", strconv.Itoa(n))
		return nil, ce
	}
	resp := connect.NewResponse(&testpb.Order{Name: "orders/" + req.Msg.GetRequestId(), Item: req.Msg.GetItem(), Run: int64(n)})
	resp.Header().Set("X-Run", strconv.Itoa(n))
	resp.Header().Set("X-Trace-Bin", connect.EncodeBinaryHeader([]byte{0, 1, 0xff}))
	resp.Trailer().Set("X-Done", "run-"+strconv.Itoa(n))
	if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
		info.ResponseHeader().Set("X-Context", "set-"+strconv.Itoa(n))
	}
	return resp, nil
}

func (o *orders) Charge(ctx context.Context, req *connect.Request[testpb.ChargeRequest]) (*connect.Response[testpb.ChargeResponse], error) {
	o.Wait(ctx)
	n := o.Run("charge:" + req.Header().Get("Idempotency-Key"))
	return connect.NewResponse(&testpb.ChargeResponse{Charge: "charges/" + req.Msg.GetOrder(), Run: int64(n)}), nil
}

func (o *orders) GetOrder(_ context.Context, req *connect.Request[testpb.GetOrderRequest]) (*connect.Response[testpb.Order], error) {
	return connect.NewResponse(&testpb.Order{Name: req.Msg.GetName()}), nil
}

func (o *orders) WatchOrders(_ context.Context, req *connect.Request[testpb.WatchOrdersRequest], stream *connect.ServerStream[testpb.Order]) error {
	n := o.Run("watch:" + req.Msg.GetRequestId())
	for i := range req.Msg.GetCount() {
		if err := stream.Send(&testpb.Order{Name: "orders/" + strconv.Itoa(int(i)), Run: int64(n)}); err != nil {
			return err
		}
	}
	return nil
}

// serve starts an HTTP server of the Connect handler of svc, with the
// server interceptor of opts over store, on a free port of 127.0.0.1,
// for HTTP/1.1 and HTTP/2 without TLS, and returns its URL.
func serve(t testing.TB, svc testpbconnect.OrdersHandler, store persistence.Store, opts ...grpcidempotency.ServerOption) string {
	t.Helper()
	idem, err := connectgo.NewServerInterceptor(store, opts...)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(testpbconnect.NewOrdersHandler(svc, connect.WithInterceptors(idem)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux, Protocols: new(http.Protocols), ReadHeaderTimeout: time.Minute}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// httpClient returns an HTTP client that speaks HTTP/1.1 or HTTP/2
// (without TLS) only.
func httpClient(t testing.TB, http2 bool) *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	if http2 {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A client setup: an HTTP version and a protocol.
type setup struct {
	name  string
	http2 bool
	opts  []connect.ClientOption
}

var setups = []setup{
	{"connect/HTTP1.1", false, nil},
	{"connect/HTTP2", true, nil},
	{"grpc-web/HTTP1.1", false, []connect.ClientOption{connect.WithGRPCWeb()}},
	{"grpc/HTTP2", true, []connect.ClientOption{connect.WithGRPC()}},
}

func (s setup) client(t testing.TB, url string, opts ...connect.ClientOption) testpbconnect.OrdersClient {
	return testpbconnect.NewOrdersClient(httpClient(t, s.http2), url, append(append([]connect.ClientOption(nil), s.opts...), opts...)...)
}

// reasonOf returns the reason of the ErrorInfo of a Connect error.
func reasonOf(err error) string {
	info, _ := detail[*errdetails.ErrorInfo](err)
	return info.GetReason()
}

// detail returns the detail of type T of a Connect error.
func detail[T proto.Message](err error) (T, bool) {
	var zero T
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return zero, false
	}
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		if v, ok := v.(T); ok {
			return v, true
		}
	}
	return zero, false
}

// Over HTTP/1.1 and HTTP/2, in the Connect, gRPC-Web and gRPC protocols:
// a retry gets the stored response, its headers and trailers, marked as a
// replay, without running the handler; another request with the key is
// refused.
func TestReplaysOverEachProtocol(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			svc := newOrders()
			client := s.client(t, serve(t, svc, memory.New()))
			msg := &testpb.CreateOrderRequest{Item: "book", RequestId: "k"}
			first, err := client.CreateOrder(t.Context(), connect.NewRequest(msg))
			require.NoError(t, err)
			assert.False(t, grpcidempotency.Replayed(first.Header()))
			second, err := client.CreateOrder(t.Context(), connect.NewRequest(msg))
			require.NoError(t, err)
			assert.True(t, proto.Equal(first.Msg, second.Msg))
			assert.True(t, grpcidempotency.Replayed(second.Header()))
			assert.Equal(t, "1", second.Header().Get("X-Run"))
			assert.Equal(t, "set-1", second.Header().Get("X-Context"), "headers set through the CallInfo")
			b, err := connect.DecodeBinaryHeader(second.Header().Get("X-Trace-Bin"))
			require.NoError(t, err)
			assert.Equal(t, []byte{0, 1, 0xff}, b)
			assert.Equal(t, "run-1", second.Trailer().Get("X-Done"))
			assert.Equal(t, 1, svc.Total())

			_, err = client.CreateOrder(t.Context(), connect.NewRequest(&testpb.CreateOrderRequest{Item: "pen", RequestId: "k"}))
			assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
			assert.Equal(t, grpcidempotency.ReasonKeyReused, reasonOf(err))

			req := connect.NewRequest(&testpb.ChargeRequest{Order: "orders/1"})
			req.Header().Set("Idempotency-Key", "charge-1")
			for range 2 {
				_, err := client.Charge(t.Context(), req)
				require.NoError(t, err)
			}
			assert.Equal(t, 1, svc.Runs("charge:charge-1"))
		})
	}
}

// Stored errors are replayed with their code, message, details and
// metadata; the codes that say the call did not execute release the key.
func TestStoredErrors(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			svc := newOrders()
			client := s.client(t, serve(t, svc, memory.New()))
			notStored := map[connect.Code]bool{
				connect.CodeCanceled: true, connect.CodeDeadlineExceeded: true, connect.CodeUnauthenticated: true,
				connect.CodePermissionDenied: true, connect.CodeResourceExhausted: true, connect.CodeAborted: true,
				connect.CodeUnavailable: true, connect.CodeUnimplemented: true, connect.CodeInternal: true,
				connect.CodeUnknown: true, connect.CodeDataLoss: true,
			}
			for c := connect.CodeCanceled; c <= connect.CodeUnauthenticated; c++ {
				tc := struct {
					code   connect.Code
					stored bool
				}{c, !notStored[c]}
				key := tc.code.String()
				msg := &testpb.CreateOrderRequest{RequestId: key, FailCode: int32(tc.code)}
				_, err1 := client.CreateOrder(t.Context(), connect.NewRequest(msg))
				_, err2 := client.CreateOrder(t.Context(), connect.NewRequest(msg))
				assert.Equal(t, tc.code, connect.CodeOf(err1), key)
				assert.Equal(t, tc.code, connect.CodeOf(err2), key)
				var ce *connect.Error
				require.ErrorAs(t, err2, &ce)
				if !tc.stored {
					assert.Equal(t, 2, svc.Runs("create:"+key), key)
					continue
				}
				assert.Equal(t, 1, svc.Runs("create:"+key), key)
				assert.Equal(t, "failed in run 1", ce.Message(), key)
				assert.True(t, grpcidempotency.Replayed(ce.Meta()), key)
				assert.Equal(t, "1", ce.Meta().Get("X-Run"), key)
				lm, ok := detail[*errdetails.LocalizedMessage](err2)
				require.True(t, ok, key)
				assert.Equal(t, "run 1", lm.GetMessage())
			}
		})
	}
}

// A duplicate while the first call runs gets ABORTED with a RetryInfo;
// the client interceptor waits it out and gets the first call's response.
func TestKeyInUse(t *testing.T) {
	svc := newOrders()
	svc.Hold, svc.Entered = make(chan struct{}), make(chan struct{}, 2)
	url := serve(t, svc, memory.New(), grpcidempotency.WithMaxRetryDelay(10*time.Millisecond))
	client := setups[0].client(t, url)
	msg := &testpb.CreateOrderRequest{RequestId: "held"}
	first := make(chan error, 1)
	go func() {
		_, err := client.CreateOrder(t.Context(), connect.NewRequest(msg))
		first <- err
	}()
	<-svc.Entered
	_, err := client.CreateOrder(t.Context(), connect.NewRequest(msg))
	assert.Equal(t, connect.CodeAborted, connect.CodeOf(err))
	assert.Equal(t, grpcidempotency.ReasonKeyInUse, reasonOf(err))
	info, ok := detail[*errdetails.RetryInfo](err)
	require.True(t, ok)
	assert.Equal(t, 10*time.Millisecond, info.GetRetryDelay().AsDuration())

	idem, err := connectgo.NewClientInterceptor(grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{MaxAttempts: 1000}))
	require.NoError(t, err)
	retrying := setups[0].client(t, url, connect.WithInterceptors(idem))
	second := make(chan *testpb.Order, 1)
	go func() {
		resp, err := retrying.CreateOrder(t.Context(), connect.NewRequest(msg))
		assert.NoError(t, err)
		second <- resp.Msg
	}()
	close(svc.Hold)
	require.NoError(t, <-first)
	assert.EqualValues(t, 1, (<-second).GetRun())
	assert.Equal(t, 1, svc.Total())
}

// 100 identical calls at once, over HTTP/2, run the handler once.
func TestConcurrentIdenticalCallsRunOnce(t *testing.T) {
	svc := newOrders()
	client := setups[1].client(t, serve(t, svc, memory.New(), grpcidempotency.WithGuardOptions(idempotency.WithWait(time.Minute))))
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			resp, err := client.CreateOrder(t.Context(), connect.NewRequest(&testpb.CreateOrderRequest{RequestId: "burst"}))
			if assert.NoError(t, err) {
				assert.EqualValues(t, 1, resp.Msg.GetRun())
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, svc.Total())
}

// The client gives a call one key, in a copy of its message, and keeps
// the caller's own; a method that requires a key refuses calls without
// one.
func TestClientKeys(t *testing.T) {
	svc := newOrders()
	url := serve(t, svc, memory.New(),
		grpcidempotency.WithMethodPolicy(testpbconnect.OrdersChargeProcedure, grpcidempotency.Policy{RequireKey: true}))
	idem, err := connectgo.NewClientInterceptor(grpcidempotency.WithKeyedMethods(testpbconnect.OrdersChargeProcedure))
	require.NoError(t, err)
	client := setups[0].client(t, url, connect.WithInterceptors(idem))
	msg := &testpb.CreateOrderRequest{Item: "x"}
	req := connect.NewRequest(msg)
	resp, err := client.CreateOrder(t.Context(), req)
	require.NoError(t, err)
	assert.Len(t, resp.Msg.GetName(), len("orders/")+36, "a UUID")
	assert.Empty(t, msg.GetRequestId(), "the caller's message is not changed")
	assert.Same(t, msg, req.Msg)

	resp, err = client.CreateOrder(grpcidempotency.ContextWithKey(t.Context(), "mine"), connect.NewRequest(&testpb.CreateOrderRequest{}))
	require.NoError(t, err)
	assert.Equal(t, "orders/mine", resp.Msg.GetName())

	charge := connect.NewRequest(&testpb.ChargeRequest{})
	for range 2 {
		resp, err := client.Charge(t.Context(), charge)
		require.NoError(t, err, "WithKeyedMethods: the key goes in a header")
		assert.EqualValues(t, 1, resp.Msg.GetRun(), "a new key for each call")
		assert.Empty(t, charge.Header().Get("Idempotency-Key"), "the caller's request is not changed")
	}
	_, err = setups[0].client(t, url).Charge(t.Context(), connect.NewRequest(&testpb.ChargeRequest{}))
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	assert.Equal(t, grpcidempotency.ReasonMissingKey, reasonOf(err))
}

// Callers in different scopes never share a record.
func TestScope(t *testing.T) {
	svc := newOrders()
	client := setups[0].client(t, serve(t, svc, memory.New(), grpcidempotency.WithScope(
		func(ctx context.Context) (string, error) {
			if info, ok := connect.CallInfoForHandlerContext(ctx); ok && info.RequestHeader().Get("X-User") != "" {
				return info.RequestHeader().Get("X-User"), nil
			}
			return "", grpcidempotency.ErrNoScope
		})))
	for _, user := range []string{"alice", "bob", "alice", ""} {
		req := connect.NewRequest(&testpb.CreateOrderRequest{RequestId: "k"})
		req.Header().Set("X-User", user)
		_, err := client.CreateOrder(t.Context(), req)
		if user == "" {
			assert.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
			continue
		}
		require.NoError(t, err)
	}
	assert.Equal(t, 2, svc.Total())
}

// Streaming calls pass through.
func TestStreamingCallsPassThrough(t *testing.T) {
	svc := newOrders()
	client := setups[1].client(t, serve(t, svc, memory.New()))
	for range 2 {
		stream, err := client.WatchOrders(t.Context(), connect.NewRequest(&testpb.WatchOrdersRequest{RequestId: "k", Count: 1}))
		require.NoError(t, err)
		for stream.Receive() {
		}
		require.NoError(t, stream.Err())
	}
	assert.Equal(t, 2, svc.Runs("watch:k"))
}

// Calls over HTTP/1.1 through a proxy that loses requests and replies,
// from clients that retry with the client interceptor, on each store:
// every key's side effect happens exactly once, and every call gets its
// response.
func TestLostRepliesThroughAProxy(t *testing.T) {
	backends.ForEach(t, func(t *testing.T, open func() persistence.Store) {
		const clients, keys, workers = 3, 30, 2
		seed := testenv.Seed(t, "CONNECTIDEMPOTENCY_SEED")
		svc := newOrders()
		// A reservation whose write lands after its call was cancelled
		// holds the key until its lease lapses: a short lease keeps that
		// within the clients' budget.
		opts := []grpcidempotency.ServerOption{
			grpcidempotency.WithMaxRetryDelay(10 * time.Millisecond),
			grpcidempotency.WithGuardOptions(idempotency.WithLease(time.Second)),
		}
		urls := []string{serve(t, svc, open(), opts...), serve(t, svc, open(), opts...)}
		idem, err := connectgo.NewClientInterceptor(grpcidempotency.WithRetry(
			grpcidempotency.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}))
		require.NoError(t, err)
		var proxies []*lossyproxy.Proxy
		conns := make([][]testpbconnect.OrdersClient, clients)
		for c := range clients {
			for i, url := range urls {
				p := lossyproxy.Start(t, url[len("http://"):], lossyh2.Scheduled(lossyh2.Random(seed, uint64(c*len(urls)+i), 0.1, 0.1), lossyproxy.Pass, lossyproxy.LoseReply, lossyproxy.LoseRequest))
				proxies = append(proxies, p)
				conns[c] = append(conns[c], setups[0].client(t, p.URL, connect.WithInterceptors(idem)))
			}
		}
		lossyproxy.Drive(seed, clients, keys, workers, len(urls), func(client, key, proxy int) {
			req := connect.NewRequest(&testpb.CreateOrderRequest{Item: "x", RequestId: fmt.Sprintf("key-%d", key)})
			resp, err := conns[client][proxy].CreateOrder(t.Context(), req)
			if assert.NoError(t, err, "client %d, key %d", client, key) {
				assert.EqualValues(t, 1, resp.Msg.GetRun(), "client %d, key %d", client, key)
			}
		})
		for k := range keys {
			assert.Equal(t, 1, svc.Runs(fmt.Sprintf("create:key-%d", k)), "key %d", k)
		}
		var lostReplies int64
		for _, p := range proxies {
			lostReplies += p.Stats().LostReplies
		}
		assert.Positive(t, lostReplies, "the proxies lost replies")
	})
}

// A call whose context ends while the client waits for its next attempt
// ends with the context's code.
func TestClientStopsWithTheCallsContext(t *testing.T) {
	svc := newOrders()
	idem, err := connectgo.NewClientInterceptor(grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{
		MaxAttempts: 1000, BaseDelay: time.Hour, MaxDelay: time.Hour, MaxElapsed: 2 * time.Hour, KeyWindow: 24 * time.Hour}))
	require.NoError(t, err)
	client := setups[0].client(t, serve(t, svc, memory.New()), connect.WithInterceptors(idem))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client.CreateOrder(ctx, connect.NewRequest(&testpb.CreateOrderRequest{RequestId: "k", FailCode: int32(connect.CodeUnavailable)}))
		done <- err
	}()
	for svc.Runs("create:k") == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	assert.Equal(t, connect.CodeCanceled, connect.CodeOf(<-done))
}
