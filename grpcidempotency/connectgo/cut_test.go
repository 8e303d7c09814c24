package connectgo_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/connectgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/cutproxy"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// retrying returns a client interceptor with a small, fast budget.
func retrying(t *testing.T) connect.Interceptor {
	idem, err := connectgo.NewClientInterceptor(grpcidempotency.WithRetry(
		grpcidempotency.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	require.NoError(t, err)
	return idem
}

// A reply cut after the server ran the call, by a connection that breaks
// before the reply's header, inside its message or before its end, over
// each protocol, on each store, is a lost answer: the client interceptor
// sends the call again with its key, and gets the replay of the one run.
func TestClientRetriesACutReply(t *testing.T) {
	backends.ForEach(t, func(t *testing.T, open func() persistence.Store) {
		svc := newOrders()
		addr := serve(t, svc, open())[len("http://"):]
		for _, s := range setups {
			for _, cut := range cutproxy.Cuts(s.http2) {
				t.Run(s.name+"/"+cut.String(), func(t *testing.T) {
					p := cutproxy.Start(t, addr, cutproxy.First(cut))
					client := s.client(t, p.URL, connect.WithInterceptors(retrying(t)))
					resp, err := client.CreateOrder(t.Context(), connect.NewRequest(&testpb.CreateOrderRequest{Item: "book"}))
					require.NoError(t, err)
					assert.True(t, grpcidempotency.Replayed(resp.Header()), "the second attempt carries the first one's key")
					assert.EqualValues(t, 1, resp.Msg.GetRun())
					assert.Equal(t, "run-1", resp.Trailer().Get("X-Done"))
					assert.Equal(t, 1, svc.Runs("create:"+strings.TrimPrefix(resp.Msg.GetName(), "orders/")))
					st := p.Stats()
					assert.Equal(t, cutproxy.Stats{Connections: st.Connections, Replies: 2, Cuts: 1}, st)
				})
			}
		}
	})
}

// The server's answers are not lost answers, its INVALID_ARGUMENT and
// UNKNOWN (a handler's plain error) included: the client interceptor
// returns them after one attempt.
func TestClientReturnsTheServersAnswers(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			svc := newOrders()
			p := cutproxy.Start(t, serve(t, svc, memory.New())[len("http://"):], nil)
			client := s.client(t, p.URL, connect.WithInterceptors(retrying(t)))
			for i, c := range []connect.Code{connect.CodeInvalidArgument, connect.CodeUnknown, connect.CodeInternal, connect.CodeDataLoss} {
				_, err := client.CreateOrder(t.Context(), connect.NewRequest(&testpb.CreateOrderRequest{RequestId: c.String(), FailCode: int32(c)}))
				assert.Equal(t, c, connect.CodeOf(err))
				assert.True(t, connect.IsWireError(err), "%v", err)
				assert.EqualValues(t, i+1, p.Stats().Replies, "%v: one attempt", c)
			}
		})
	}
}
