package grpcgo_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/cutproxy"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/persistence"
)

// A reply cut after the server ran the call, by a connection that breaks
// before the reply's header, inside its message or before its trailers,
// on each store, is a lost answer: the client interceptor sends the call
// again with its key, and gets the replay of the one run.
func TestClientRetriesACutReply(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() persistence.Store) {
		svc := newOrders()
		addr := serve(t, svc, open())
		for _, cut := range cutproxy.Cuts(true) {
			t.Run(cut.String(), func(t *testing.T) {
				p := cutproxy.Start(t, addr, cutproxy.First(cut))
				client := dialIdempotent(t, p.Addr, fast)
				var header, trailer metadata.MD
				resp, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "book"}, grpc.Header(&header), grpc.Trailer(&trailer))
				require.NoError(t, err)
				assert.True(t, grpcidempotency.Replayed(header), "the second attempt carries the first one's key")
				assert.EqualValues(t, 1, resp.GetRun())
				assert.Equal(t, []string{"run-1"}, trailer.Get("x-done"))
				assert.Equal(t, 1, svc.Runs("create:"+strings.TrimPrefix(resp.GetName(), "orders/")))
				st := p.Stats()
				assert.Equal(t, cutproxy.Stats{Connections: st.Connections, Replies: 2, Cuts: 1}, st)
			})
		}
	})
}
