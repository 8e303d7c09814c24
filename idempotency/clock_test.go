package idempotency_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A completed record expires WithExpiry after the call completes, not
// after it started, rounded up to a whole second.
func TestCompletionExpiryCountsFromCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		g, err := idempotency.NewGuard(store, idempotency.WithExpiry(time.Hour))
		require.NoError(t, err)
		var key string
		var completedAt time.Time
		_, err = g.Do(t.Context(), "k", "", func(ctx context.Context) ([]byte, error) {
			key, _ = idempotency.KeyFromContext(ctx)
			time.Sleep(90*time.Second + time.Millisecond)
			completedAt = time.Now()
			return []byte(`"ok"`), nil
		})
		require.NoError(t, err)
		rec, err := store.Get(t.Context(), key)
		require.NoError(t, err)
		assert.Equal(t, completedAt.Add(time.Hour+time.Second).Truncate(time.Second), rec.ExpiresAt.Round(0))
	})
}
