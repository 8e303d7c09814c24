package grpcgo_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/lossyh2"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/internal/testing/lossyproxy"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence"
)

// The tests over real stores (package backends): they skip when a
// server cannot start, and fail instead with
// IDEMPOTENCY_REQUIRE_INTEGRATION=1.

func TestMain(m *testing.M) { backends.Main(m) }

var forEachBackend = backends.ForEach

// Two servers on one database, as two processes: what one completed, the
// other replays; what one holds, the other refuses with ABORTED; 100
// identical calls across both run the handler once.
func TestServersShareAStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() persistence.Store) {
		svc := newOrders()
		wait := grpcidempotency.WithGuardOptions(idempotency.WithWait(time.Minute))
		a := dial(t, serve(t, svc, open(), wait))
		b := dial(t, serve(t, svc, open(), wait))

		req := &testpb.CreateOrderRequest{Item: "book", RequestId: "replayed"}
		_, err := a.CreateOrder(t.Context(), req)
		require.NoError(t, err)
		resp, err := b.CreateOrder(t.Context(), req)
		require.NoError(t, err)
		assert.EqualValues(t, 1, resp.GetRun())

		_, err = b.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "pen", RequestId: "replayed"})
		assert.Equal(t, grpcidempotency.ReasonKeyReused, reasonOf(err))

		burst := &testpb.CreateOrderRequest{Item: "x", RequestId: "burst"}
		var wg sync.WaitGroup
		for i := range 100 {
			client := []testpb.OrdersClient{a, b}[i%2]
			wg.Go(func() {
				resp, err := client.CreateOrder(t.Context(), burst)
				if assert.NoError(t, err) {
					assert.EqualValues(t, 1, resp.GetRun())
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 1, svc.Runs("create:burst"))
	})
}

// The holder of a key in one process makes a duplicate in another wait
// or fail with ABORTED.
func TestKeyInUseAcrossServers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() persistence.Store) {
		svc := newOrders()
		svc.Hold, svc.Entered = make(chan struct{}), make(chan struct{}, 1)
		a := dial(t, serve(t, svc, open()))
		b := dial(t, serve(t, svc, open()))
		req := &testpb.CreateOrderRequest{RequestId: "held"}
		first := make(chan error, 1)
		go func() {
			_, err := a.CreateOrder(t.Context(), req)
			first <- err
		}()
		<-svc.Entered
		_, err := b.CreateOrder(t.Context(), req)
		assert.Equal(t, codes.Aborted, status.Code(err))
		assert.Equal(t, grpcidempotency.ReasonKeyInUse, reasonOf(err))
		close(svc.Hold)
		require.NoError(t, <-first)
	})
}

// Calls through a proxy that loses calls and replies, from clients that
// retry with the client interceptor: every key's side effect happens
// exactly once, and every call gets its response.
func TestLostRepliesThroughAProxy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() persistence.Store) {
		const clients, keys, workers = 3, 40, 2
		seed := testenv.Seed(t, "GRPCIDEMPOTENCY_SEED")
		svc := newOrders()
		// A cut connection cancels the calls on it, which may cancel a
		// reservation's write after the store received it: the write then
		// lands with no one to release it, and the key is held until the
		// reservation's lease lapses. A short lease keeps that within the
		// clients' budget.
		opts := []grpcidempotency.ServerOption{
			grpcidempotency.WithMaxRetryDelay(10 * time.Millisecond),
			grpcidempotency.WithGuardOptions(idempotency.WithLease(time.Second)),
		}
		addrs := []string{serve(t, svc, open(), opts...), serve(t, svc, open(), opts...)}
		// A budget that the proxy's faults and a slow store under load do
		// not exhaust: attempts are cheap, and a duplicate of a call in
		// progress retries every 10 ms.
		idem, err := grpcgo.NewClientInterceptor(grpcidempotency.WithRetry(
			grpcidempotency.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}))
		require.NoError(t, err)
		var proxies []*lossyh2.Proxy
		conns := make([][]testpb.OrdersClient, clients)
		for c := range clients {
			for i, addr := range addrs {
				p := lossyh2.Start(t, addr, lossyh2.Scheduled(lossyh2.Random(seed, uint64(c*len(addrs)+i), 0.05, 0.05), lossyproxy.Pass, lossyproxy.LoseReply, lossyproxy.LoseRequest))
				proxies = append(proxies, p)
				conns[c] = append(conns[c], dial(t, p.Addr, grpc.WithChainUnaryInterceptor(idem),
					grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond}})))
			}
		}
		lossyproxy.Drive(seed, clients, keys, workers, len(addrs), func(client, key, proxy int) {
			req := &testpb.CreateOrderRequest{Item: "x", RequestId: fmt.Sprintf("key-%d", key)}
			resp, err := conns[client][proxy].CreateOrder(t.Context(), req, grpc.WaitForReady(true))
			if assert.NoError(t, err, "client %d, key %d", client, key) {
				assert.EqualValues(t, 1, resp.GetRun(), "client %d, key %d", client, key)
			}
		})
		for k := range keys {
			assert.Equal(t, 1, svc.Runs(fmt.Sprintf("create:key-%d", k)), "key %d", k)
		}
		var lost lossyh2.Stats
		for _, p := range proxies {
			s := p.Stats()
			lost.Calls += s.Calls
			lost.LostCalls += s.LostCalls
			lost.LostReplies += s.LostReplies
		}
		t.Logf("seed %d: %d calls, %d lost, %d replies lost", seed, lost.Calls, lost.LostCalls, lost.LostReplies)
		assert.Positive(t, lost.LostReplies, "the proxies lost replies")
	})
}
