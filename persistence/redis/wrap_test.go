package redis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/internal/testing/teststeps"
	"github.com/retrysafe/retrysafe/persistence"
)

// These tests run the idempotency package's Wrap over the Redis store and a
// real redis-server.

type order struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

type receipt struct {
	ChargeID string `json:"charge_id"`
	Amount   int    `json:"amount"`
}

var errDeclined = errors.New("card declined")

// charger is a handler that counts its runs.
type charger struct {
	runs atomic.Int64
	// during, if set, runs inside the handler before it returns.
	during func(ctx context.Context, o order) error
}

func (c *charger) handle(ctx context.Context, o order) (receipt, error) {
	run := c.runs.Add(1)
	if c.during != nil {
		if err := c.during(ctx, o); err != nil {
			return receipt{}, err
		}
	}
	return receipt{ChargeID: "ch_" + o.OrderID + "_" + strconv.FormatInt(run, 10), Amount: o.Amount}, nil
}

func wrap(t *testing.T, c *charger, store persistence.Store, opts ...idempotency.WrapOption) func(context.Context, order) (receipt, error) {
	t.Helper()
	opts = append([]idempotency.WrapOption{idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders")}, opts...)
	h, err := idempotency.Wrap(c.handle, store, opts...)
	require.NoError(t, err)
	return h
}

func newOrder() order { return order{OrderID: rand.Text(), Amount: 4200} }

// TestWrapRoundTrips counts the requests an invocation costs: a first call
// reserves and completes (2), a replay only reserves and gets the record back
// with the conflict (1), a handler error reserves and releases (2).
func TestWrapRoundTrips(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	rt := countRoundTrips(t, client)
	store := newStore(t, client)
	c := &charger{}
	h := wrap(t, c, store, idempotency.WithPermanentErrors(func(err error) bool { return errors.Is(err, errDeclined) }))
	ctx := t.Context()

	// Load the scripts, so that the counts are those of the steady state.
	_, err := h(ctx, newOrder())
	require.NoError(t, err)
	require.NoError(t, store.Delete(ctx, "warm", "t"))

	o := newOrder()
	rt.reset()
	first, err := h(ctx, o)
	require.NoError(t, err)
	rt.require(t, "first call", "evalsha", "evalsha")

	rt.reset()
	again, err := h(ctx, o)
	require.NoError(t, err)
	require.Equal(t, first, again)
	rt.require(t, "replay", "evalsha")
	require.EqualValues(t, 2, c.runs.Load())

	c.during = func(context.Context, order) error { return errors.New("downstream unavailable") }
	rt.reset()
	_, err = h(ctx, newOrder())
	require.EqualError(t, err, "downstream unavailable")
	rt.require(t, "handler error (released)", "evalsha", "evalsha")

	c.during = func(context.Context, order) error { return errDeclined }
	declined := newOrder()
	rt.reset()
	_, err = h(ctx, declined)
	require.ErrorIs(t, err, errDeclined)
	rt.require(t, "permanent handler error (recorded)", "evalsha", "evalsha")

	rt.reset()
	_, err = h(ctx, declined)
	var stored *idempotency.RecordedError
	require.ErrorAs(t, err, &stored)
	require.Equal(t, errDeclined.Error(), stored.Message)
	rt.require(t, "replay of a recorded error", "evalsha")
}

// TestWrapConcurrentInvocations races 50 invocations with one key, each in
// its own "execution environment" (client, store, wrapped handler). The
// winner's handler holds the key until the 49 others have answered: they
// all get *idempotency.InProgressError. Then 50 more get the stored result.
func TestWrapConcurrentInvocations(t *testing.T) {
	srv := redisserver.Start(t)
	const n = 50
	o := newOrder()
	var (
		c        charger
		answered atomic.Int64
		others   = make(chan struct{})
	)
	c.during = func(ctx context.Context, _ order) error {
		select {
		case <-others:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	handlers := make([]func(context.Context, order) (receipt, error), n)
	for i := range handlers {
		client := srv.NewClient()
		require.NoError(t, client.Ping(t.Context()).Err())
		handlers[i] = wrap(t, &c, newStore(t, client))
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	results := make([]receipt, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, h := range handlers {
		wg.Go(func() {
			<-start
			results[i], errs[i] = h(ctx, o)
			if errs[i] != nil && answered.Add(1) == n-1 {
				close(others)
			}
		})
	}
	close(start)
	wg.Wait()

	require.EqualValues(t, 1, c.runs.Load(), "the handler ran more than once")
	var winner receipt
	inProgress := 0
	for i, err := range errs {
		var ipe *idempotency.InProgressError
		switch {
		case err == nil:
			require.Empty(t, winner.ChargeID, "two invocations returned a result")
			winner = results[i]
		case errors.As(err, &ipe):
			inProgress++
		default:
			t.Fatalf("invocation %d: %v", i, err)
		}
	}
	require.NotEmpty(t, winner.ChargeID)
	require.Equal(t, n-1, inProgress)

	// Once completed, every invocation replays the winner's result.
	for i, h := range handlers {
		wg.Go(func() { results[i], errs[i] = h(ctx, o) })
	}
	wg.Wait()
	for i := range handlers {
		require.NoError(t, errs[i])
		require.Equal(t, winner, results[i])
	}
	require.EqualValues(t, 1, c.runs.Load())
}

// TestWrapServerDown stops the server: the call fails with
// *idempotency.StoreError without running the handler, and once the server
// is back the same key runs.
func TestWrapServerDown(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient(func(o *redis.Options) { o.MaxRetries = 1 })
	store := newStore(t, client)
	c := &charger{}
	h := wrap(t, c, store)
	ctx := t.Context()
	o := newOrder()

	srv.Stop()
	_, err := h(ctx, o)
	var storeErr *idempotency.StoreError
	require.ErrorAs(t, err, &storeErr)
	require.Equal(t, "put", storeErr.Op)
	require.NotErrorIs(t, err, persistence.ErrConflict)
	require.Zero(t, c.runs.Load(), "the handler ran although the reservation failed")

	srv.Restart()
	got, err := h(ctx, o)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.runs.Load())
	again, err := h(ctx, o)
	require.NoError(t, err)
	require.Equal(t, got, again)
	require.EqualValues(t, 1, c.runs.Load())
}

// TestWrapServerFrozen makes the reservation time out: the call fails with
// *idempotency.StoreError without running the handler. The frozen server
// still applies the reservation once it resumes. The core's release, sent
// meanwhile, usually never reaches it (go-redis's retries and the release
// need new connections, whose handshake times out too), so the key is held
// until the first call's deadline, and no longer.
func TestWrapServerFrozen(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient(func(o *redis.Options) {
		o.ReadTimeout = 100 * time.Millisecond
		o.WriteTimeout = 100 * time.Millisecond
	})
	store := newStore(t, client)
	c := &charger{}
	h := wrap(t, c, store, idempotency.WithFinalWriteTimeout(time.Second))
	o := newOrder()
	// Connect and load the Put script.
	_, err := h(t.Context(), newOrder())
	require.NoError(t, err)
	c.runs.Store(0)

	// A short deadline, which the test waits out.
	deadline := time.Now().Add(2 * time.Second)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	srv.Freeze()
	_, err = h(ctx, o)
	srv.Thaw()
	var storeErr *idempotency.StoreError
	require.ErrorAs(t, err, &storeErr)
	require.Equal(t, "put", storeErr.Op)
	require.Zero(t, c.runs.Load(), "the handler ran although the reservation failed")

	_, err = h(t.Context(), o)
	var ipe *idempotency.InProgressError
	if errors.As(err, &ipe) {
		// The reservation landed and was not released.
		require.Equal(t, deadline.UnixMilli(), ipe.Until.UnixMilli())
		time.Sleep(time.Until(deadline) + 10*time.Millisecond)
		_, err = h(t.Context(), o)
	}
	require.NoError(t, err)
	require.EqualValues(t, 1, c.runs.Load())
}

// TestWrapRestartBetweenReservationAndCompletion loses the data while the
// handler runs, as a failover without the latest writes would. The result
// is still returned to the caller (the core's documented behaviour when the
// completion cannot be stored); the completion is fenced, because the
// reservation is gone, and the key is not left locked: the next call runs
// the handler again, which is what losing the record means.
func TestWrapRestartBetweenReservationAndCompletion(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	var ev teststeps.Log
	c := &charger{}
	restarted := false
	c.during = func(context.Context, order) error {
		if !restarted {
			restarted = true
			srv.Restart()
		}
		return nil
	}
	h := wrap(t, c, store, idempotency.WithObserver(&ev))
	ctx := t.Context()
	o := newOrder()

	first, err := h(ctx, o)
	require.NoError(t, err)
	require.Equal(t, "ch_"+o.OrderID+"_1", first.ChargeID)
	require.Equal(t, []string{"reserved", "complete fenced", "fenced_out"}, ev.Take())

	second, err := h(ctx, o)
	require.NoError(t, err)
	require.EqualValues(t, 2, c.runs.Load())
	require.Equal(t, []string{"reserved", "complete", "new"}, ev.Take())

	third, err := h(ctx, o)
	require.NoError(t, err)
	require.Equal(t, second, third)
	require.EqualValues(t, 2, c.runs.Load())
	require.Equal(t, []string{"replay"}, ev.Take())
}

// TestConcurrentReplays: calls of a completed key that arrive together in
// one process all get its result, not *InProgressError: one reads the
// record, and the others wait for that answer.
func TestConcurrentReplays(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	for _, n := range []int{10, 200} {
		c := &charger{}
		h := wrap(t, c, store)
		o := newOrder()
		first, err := h(t.Context(), o)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs, got := make([]error, n), make([]receipt, n)
		for i := range n {
			wg.Go(func() { got[i], errs[i] = h(t.Context(), o) })
		}
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i], "call %d of %d", i, n)
			require.Equal(t, first, got[i])
		}
		require.EqualValues(t, 1, c.runs.Load())
	}
}
