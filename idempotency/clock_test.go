package idempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func TestGuardNowUsesItsClock(t *testing.T) {
	c := newClock()
	g, err := idempotency.NewGuard(memory.New(), idempotency.WithClock(c.Now))
	require.NoError(t, err)
	assert.Equal(t, c.Now(), g.Now())

	g, err = idempotency.NewGuard(memory.New())
	require.NoError(t, err)
	before := time.Now()
	assert.False(t, g.Now().Before(before), "without WithClock the Guard uses time.Now")
}

// TestCompletionExpiryUsesTheClock checks that a completed record expires
// by the Guard's clock, read when the call completes, and by the wall clock
// without WithClock, rounded up to a second either way.
func TestCompletionExpiryUsesTheClock(t *testing.T) {
	c := newClock()
	store := memory.New()
	g, err := idempotency.NewGuard(store, idempotency.WithClock(c.Now), idempotency.WithExpiry(time.Hour))
	require.NoError(t, err)
	var completedAt time.Time
	_, err = g.Do(t.Context(), "k", "", func(context.Context) ([]byte, error) {
		c.Add(90*time.Second + time.Millisecond)
		completedAt = c.Now()
		return []byte(`"ok"`), nil
	})
	require.NoError(t, err)
	rec, err := store.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, completedAt.Add(time.Hour+time.Second).Truncate(time.Second), rec.ExpiresAt)

	g, err = idempotency.NewGuard(store, idempotency.WithExpiry(time.Hour))
	require.NoError(t, err)
	before := time.Now()
	_, err = g.Do(t.Context(), "wall", "", func(context.Context) ([]byte, error) { return nil, nil })
	after := time.Now()
	require.NoError(t, err)
	rec, err = store.Get(t.Context(), "wall")
	require.NoError(t, err)
	assert.False(t, rec.ExpiresAt.Before(before.Add(time.Hour)), "expiry %v before the call", rec.ExpiresAt)
	assert.False(t, rec.ExpiresAt.After(after.Add(time.Hour+time.Second)), "expiry %v after the call", rec.ExpiresAt)
	assert.Zero(t, rec.ExpiresAt.Nanosecond(), "expiry on a whole second")
}
