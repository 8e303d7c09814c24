package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) persistence.Store { return memory.New() })
}

func TestConformanceSharedStore(t *testing.T) {
	shared := memory.New()
	storetest.Run(t, func(*testing.T) persistence.Store { return shared })
}

func TestMaxResponseSizeOmitsResponse(t *testing.T) {
	s := memory.New(func(o *memory.Options) { o.MaxResponseSize = 8 })
	now := time.Now().Truncate(time.Second)
	rec := &persistence.Record{Key: "k", Status: persistence.StatusInProgress, ExpiresAt: now.Add(time.Hour), Token: "t"}
	require.NoError(t, s.Put(context.Background(), rec, now))

	done := *rec
	done.Status = persistence.StatusCompleted
	done.Response = []byte(strings.Repeat("x", 9))
	err := s.Update(context.Background(), &done)
	require.ErrorIs(t, err, persistence.ErrResponseOmitted)

	got, err := s.Get(context.Background(), "k")
	require.NoError(t, err)
	require.Equal(t, persistence.StatusCompleted, got.Status)
	require.True(t, got.ResponseOmitted)
	require.Empty(t, got.Response)
}

func TestSweepDropsExpiredRecords(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	for i := range 2000 {
		rec := &persistence.Record{Key: fmt.Sprint("old", i), Status: persistence.StatusCompleted, ExpiresAt: now.Add(time.Second)}
		require.NoError(t, s.Put(ctx, rec, now))
	}
	// Later reservations sample the store and drop expired records as they
	// go: far fewer than 2000 are left after as many new ones.
	later := now.Add(time.Minute)
	for i := range 2000 {
		rec := &persistence.Record{Key: fmt.Sprint("new", i), ExpiresAt: later.Add(time.Hour)}
		require.NoError(t, s.Put(ctx, rec, later))
	}
	assert.Less(t, s.Len(), 2000+1000, "expired records must be swept")
	assert.GreaterOrEqual(t, s.Len(), 2000, "live records must be kept")
}

// TestLenStaysBoundedAsKeysExpire runs a store for a hundred lifetimes of
// its records: every second a new key is reserved, to live for a hundred
// seconds. The store would end with all 10000 keys if it kept them; the
// sweep keeps it near the 101 that are live at any time.
func TestLenStaysBoundedAsKeysExpire(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	start := time.Now().Truncate(time.Second)
	const lifetime = 100 // seconds, and so reservations
	most := 0
	for i := range 100 * lifetime {
		now := start.Add(time.Duration(i) * time.Second)
		rec := &persistence.Record{Key: fmt.Sprint("k", i), Status: persistence.StatusCompleted, ExpiresAt: now.Add(lifetime * time.Second)}
		require.NoError(t, s.Put(ctx, rec, now))
		most = max(most, s.Len())
	}
	// The store settles at about 4/3 of the live records; it never comes
	// near twice as many.
	assert.Less(t, most, 2*(lifetime+1), "the largest the store grew")
	for i := 99 * lifetime; i < 100*lifetime; i++ {
		_, err := s.Get(ctx, fmt.Sprint("k", i))
		require.NoError(t, err, "live records must be kept")
	}
}

func TestCancelledContext(t *testing.T) {
	s := memory.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Put(ctx, &persistence.Record{Key: "k"}, time.Now())
	require.True(t, errors.Is(err, context.Canceled))
}
