package grpcgo_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// holdLease is the lease of the held-key tests: the time after which the
// reservation of a call that ended without an outcome lapses, and is held.
// The tests wait past it with a sleep, which only ever waits longer on a
// busy machine.
const holdLease = 300 * time.Millisecond

// holds are the server options of a service that holds the keys of calls
// that end without an outcome (without the log of the lost completions),
// with leases of holdLease.
func holds(more ...idempotency.GuardOption) grpcidempotency.ServerOption {
	return holdsWith(holdLease, more...)
}

// holdsWith is holds with leases of lease.
func holdsWith(lease time.Duration, more ...idempotency.GuardOption) grpcidempotency.ServerOption {
	return grpcidempotency.WithGuardOptions(append([]idempotency.GuardOption{idempotency.WithLease(lease),
		idempotency.WithHoldUntilReleased(), idempotency.WithLogger(slog.New(slog.DiscardHandler))}, more...)...)
}

// endWithoutOutcome runs req on a server of svc over store whose
// completion is lost, as a process that dies after the handler ran: the
// caller gets the handler's answer, and the key stays reserved, held once
// its lease lapses.
func endWithoutOutcome(t *testing.T, svc *orders, store persistence.Store, req *testpb.CreateOrderRequest, lease time.Duration) {
	t.Helper()
	resp, err := dial(t, serve(t, svc, backends.EndsWithoutOutcome(store), holdsWith(lease))).CreateOrder(t.Context(), req)
	require.NoError(t, err, "the handler's own answer")
	require.EqualValues(t, 1, resp.GetRun())
}

// noWait is the context of a call to a server that would wait an hour
// (idempotency.WithWait) for a key in progress: a call refused at once
// gets the server's answer, and one that waited gets DEADLINE_EXCEEDED.
// The minute's bound only keeps a broken test from hanging.
func noWait(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A call that finds its key held, after the call that reserved it ended
// without an outcome (idempotency.WithHoldUntilReleased), is answered
// FAILED_PRECONDITION with KEY_HELD, at once even with WithWait, without
// running the handler and without storing the answer: once an operator
// releases the key, a retry runs.
func TestHeldKeyIsFailedPrecondition(t *testing.T) {
	svc := newOrders()
	store := memory.New()
	client := dial(t, serve(t, svc, store, holds()))

	// While the reservation is live (a lease of an hour), the key is in
	// use.
	live := &testpb.CreateOrderRequest{Item: "x", RequestId: "live"}
	endWithoutOutcome(t, svc, store, live, time.Hour)
	_, err := client.CreateOrder(t.Context(), live)
	assert.Equal(t, codes.Aborted, status.Code(err), "while the reservation is live, the key is in use")
	assert.Equal(t, grpcidempotency.ReasonKeyInUse, reasonOf(err))

	req := &testpb.CreateOrderRequest{Item: "x", RequestId: "k"}
	endWithoutOutcome(t, svc, store, req, holdLease)
	time.Sleep(holdLease + 100*time.Millisecond) // past the reservation's lease
	waiting := dial(t, serve(t, svc, store, holds(idempotency.WithWait(time.Hour))))
	for _, c := range []testpb.OrdersClient{client, waiting} {
		_, err = c.CreateOrder(noWait(t), req)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err), "no wait ends a hold: %v", err)
		assert.Equal(t, grpcidempotency.ReasonKeyHeld, reasonOf(err))
		info, ok := detail[*errdetails.ErrorInfo](err)
		require.True(t, ok)
		assert.Equal(t, grpcidempotency.ErrorDomain, info.GetDomain())
		assert.Equal(t, "request_id", info.GetMetadata()["field"])
		since, perr := time.Parse(time.RFC3339Nano, info.GetMetadata()["held_since"])
		require.NoError(t, perr)
		assert.False(t, since.IsZero(), "held_since")
		_, retryable := detail[*errdetails.RetryInfo](err)
		assert.False(t, retryable, "no RetryInfo: retrying does not help")
	}
	assert.Equal(t, 2, svc.Total(), "the handler did not run again")

	records, held, err := backends.Release(t.Context(), store)
	require.NoError(t, err)
	assert.Equal(t, 2, records, "the held answers were not stored")
	assert.Equal(t, 2, held, "both reservations hold their keys")
	resp, err := client.CreateOrder(t.Context(), req)
	require.NoError(t, err)
	assert.EqualValues(t, 2, resp.GetRun(), "after the release, the retry runs")
}

// The client interceptor returns KEY_HELD at once: it sends the call
// once, where it would retry UNAVAILABLE and ABORTED.
func TestClientDoesNotRetryAHeldKey(t *testing.T) {
	svc := newOrders()
	store := memory.New()
	req := &testpb.CreateOrderRequest{Item: "x", RequestId: "k"}
	endWithoutOutcome(t, svc, store, req, holdLease)
	time.Sleep(holdLease + 100*time.Millisecond) // past the reservation's lease

	a := &attempts{}
	idem, err := grpcgo.NewServerInterceptor(store, holds())
	require.NoError(t, err)
	client := dialIdempotent(t, serveWith(t, svc, grpc.ChainUnaryInterceptor(a.intercept, idem)), fast)
	_, err = client.CreateOrder(t.Context(), req)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.Equal(t, grpcidempotency.ReasonKeyHeld, reasonOf(err))
	seen := a.all()
	require.Len(t, seen, 1, "one attempt")
	assert.Equal(t, "k", seen[0].field)
	assert.Equal(t, 1, svc.Total())
}
