package connectgo_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/connectgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A call whose key is held, after the call that reserved it ended without
// an outcome (idempotency.WithHoldUntilReleased), is answered
// FAILED_PRECONDITION with KEY_HELD in every protocol, and the client
// interceptor sends it once; once an operator releases the key, a retry
// runs.
func TestHeldKey(t *testing.T) {
	const lease = 300 * time.Millisecond
	holds := func(more ...idempotency.GuardOption) grpcidempotency.ServerOption {
		return grpcidempotency.WithGuardOptions(append([]idempotency.GuardOption{idempotency.WithLease(lease),
			idempotency.WithHoldUntilReleased(), idempotency.WithLogger(slog.New(slog.DiscardHandler))}, more...)...)
	}
	svc := newOrders()
	store := memory.New()
	msg := &testpb.CreateOrderRequest{Item: "x", RequestId: "k"}
	// The first call's completion is lost: it gets the handler's answer,
	// and its reservation is held once its lease lapses.
	resp, err := setups[0].client(t, serve(t, svc, backends.EndsWithoutOutcome(store), holds())).CreateOrder(t.Context(), connect.NewRequest(msg))
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.Msg.GetRun())
	time.Sleep(lease + 100*time.Millisecond) // past the reservation's lease: a lower bound, whatever the load

	// A server that would wait an hour for a key in progress: a call it
	// refuses at once gets its answer, one it made wait the client's
	// DEADLINE_EXCEEDED, after a minute that only keeps a broken test
	// from hanging.
	url := serve(t, svc, store, holds(idempotency.WithWait(time.Hour)))
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := s.client(t, url).CreateOrder(ctx, connect.NewRequest(msg))
			assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "no wait ends a hold: %v", err)
			assert.Equal(t, grpcidempotency.ReasonKeyHeld, reasonOf(err))
			info, _ := detail[*errdetails.ErrorInfo](err)
			assert.NotEmpty(t, info.GetMetadata()["held_since"])
			_, retryable := detail[*errdetails.RetryInfo](err)
			assert.False(t, retryable)
		})
	}

	var sent atomic.Int32
	count := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			sent.Add(1)
			return next(ctx, req)
		}
	})
	idem, err := connectgo.NewClientInterceptor(grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{MaxAttempts: 30, BaseDelay: time.Millisecond}))
	require.NoError(t, err)
	_, err = setups[0].client(t, url, connect.WithInterceptors(idem, count)).CreateOrder(t.Context(), connect.NewRequest(msg))
	assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
	assert.Equal(t, grpcidempotency.ReasonKeyHeld, reasonOf(err))
	assert.EqualValues(t, 1, sent.Load(), "the client interceptor does not retry a held key")
	assert.Equal(t, 1, svc.Total(), "the handler did not run again")

	records, held, err := backends.Release(t.Context(), store)
	require.NoError(t, err)
	assert.Equal(t, 1, records, "the held answers were not stored")
	assert.Equal(t, 1, held)
	resp, err = setups[0].client(t, url).CreateOrder(t.Context(), connect.NewRequest(msg))
	require.NoError(t, err)
	assert.EqualValues(t, 2, resp.Msg.GetRun(), "after the release, the retry runs")
}
