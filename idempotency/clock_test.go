package idempotency_test

import (
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
