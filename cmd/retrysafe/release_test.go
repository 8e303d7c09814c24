package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
)

// heldKey is a call through idempotency.Wrap whose handler runs until
// finish, as a call that crashed would have left its key: in progress
// until the call's deadline.
type heldKey struct {
	key    string
	runs   *atomic.Int32
	finish func() error // lets the handler return, and returns the call's error
	call   func() error // another call with the same input
	// callUntil is another call with the same input and its own deadline.
	callUntil func(deadline time.Time) error
}

// holdKey starts the call, with the deadline given, and returns once its
// handler runs.
func holdKey(t *testing.T, f *fixture, deadline time.Time, opts ...idempotency.WrapOption) *heldKey {
	t.Helper()
	release := make(chan struct{})
	started := make(chan string, 2)
	runs := new(atomic.Int32)
	h := idempotency.Must(idempotency.Wrap(func(ctx context.Context, c charge) (receipt, error) {
		runs.Add(1)
		key, _ := idempotency.KeyFromContext(ctx)
		started <- key
		<-release
		return chargeCard(ctx, c)
	}, f.store, append([]idempotency.WrapOption{idempotency.WithKey("order_id"), idempotency.WithKeyPrefix("orders.main.process"),
		idempotency.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...))
	callUntil := func(deadline time.Time) error {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		_, err := h(ctx, charge{OrderID: "ord_7", Amount: 500})
		return err
	}
	call := func() error { return callUntil(deadline) }
	done := make(chan error, 1)
	go func() { done <- call() }()
	k := &heldKey{key: <-started, runs: runs, call: call, callUntil: callUntil}
	var finished bool
	k.finish = func() error {
		if !finished {
			finished = true
			close(release)
		}
		return <-done
	}
	t.Cleanup(func() {
		if !finished {
			_ = k.finish()
		}
	})
	return k
}

func TestStuckKeyIsListedAndReleased(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		now := time.Now()
		held := holdKey(t, f, now.Add(time.Minute))
		later := now.Add(2 * time.Minute) // past the call's deadline: stuck

		r := runAt(t, now, "", f.with("ls", "--stuck")...)
		requireOK(t, r)
		require.Empty(t, r.stdout, "nothing is stuck while the call may run")
		require.Contains(t, r.stderr, "no records match, of 1 read")

		r = runAt(t, later, "", f.with("ls", "--stuck", "-o", "json")...)
		requireOK(t, r)
		var listed struct {
			Records []getJSON `json:"records"`
			Scanned int       `json:"scanned"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed), r.stdout)
		require.Len(t, listed.Records, 1)
		require.Equal(t, held.key, listed.Records[0].Key)
		require.Equal(t, "stuck", listed.Records[0].State)

		r = runAt(t, later, "", f.with("ls", "--status", "inprogress", "-o", "wide")...)
		requireOK(t, r)
		require.Contains(t, r.stdout, held.key)
		require.Contains(t, r.stdout, "stuck")

		r = runAt(t, later, "", f.with("release", held.key, "--yes")...)
		requireOK(t, r)
		require.Contains(t, r.stdout, "released "+held.key+" (it was stuck)")
		r = runCmd(t, f.with("get", held.key)...)
		require.Equal(t, exitNotFound, r.code, r.stderr)

		// The call that held the key finishes, too late to complete it;
		// the key is free, and the next call runs the handler.
		require.NoError(t, held.finish())
		require.NoError(t, held.call())
		require.Equal(t, int32(2), held.runs.Load())
	})
}

// A key held for an operator (WithHoldUntilReleased) is listed as held
// once its call's deadline passed, refuses retries, and is freed by
// release.
func TestHeldKeyIsListedAndReleased(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		held := holdKey(t, f, time.Now().Add(time.Second), idempotency.WithHoldUntilReleased())
		rec, err := f.store.Get(t.Context(), held.key)
		require.NoError(t, err)
		require.True(t, rec.Held)
		time.Sleep(time.Until(rec.InProgressExpiresAt) + 10*time.Millisecond)
		require.ErrorIs(t, held.callUntil(time.Now().Add(time.Minute)), idempotency.ErrHeld, "past the deadline, a retry is refused")

		r := runCmd(t, f.with("ls", "--held", "-o", "json")...)
		requireOK(t, r)
		var listed struct {
			Records []getJSON `json:"records"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed), r.stdout)
		require.Len(t, listed.Records, 1)
		require.Equal(t, "held", listed.Records[0].State)

		r = runCmd(t, f.with("release", held.key, "--yes")...)
		requireOK(t, r)
		require.Contains(t, r.stdout, "released "+held.key+" (it was held)")

		// The call that held the key finishes, too late to complete it;
		// the key is free, and the next call runs the handler.
		require.NoError(t, held.finish())
		require.NoError(t, held.callUntil(time.Now().Add(time.Minute)), "after the release, a retry runs")
		require.Equal(t, int32(2), held.runs.Load())
	})
}

func TestReleaseOfARecordThatChangedIsRefused(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		held := holdKey(t, f, time.Now().Add(time.Minute))
		seen := getRecord(t, f, held.key)
		require.Equal(t, "in_progress", seen.State)

		// The call completes between the operator's look and the release.
		require.NoError(t, held.finish())
		r := runCmd(t, f.with("release", held.key, "--token", seen.OwnerToken, "--status", "INPROGRESS", "--yes")...)
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "the record changed: its status is COMPLETED, not INPROGRESS")

		r = runCmd(t, f.with("release", held.key, "--token", "ANOTHER", "--yes")...)
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "its owner token is "+seen.OwnerToken+", not ANOTHER")

		r = runCmd(t, f.with("release", held.key, "--yes")...)
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "the record is completed")
		require.Equal(t, "completed", getRecord(t, f, held.key).State, "nothing was released")

		r = runCmd(t, f.with("release", held.key, "--yes", "--force", "-o", "json")...)
		requireOK(t, r)
		require.Contains(t, r.stdout, `"released"`)
		require.NoError(t, held.call())
		require.Equal(t, int32(2), held.runs.Load(), "a released completed key runs again")
	})
}
