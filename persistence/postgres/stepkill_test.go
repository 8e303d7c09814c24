package postgres_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/testing/stepkill"
)

// TestKilledBetweenSteps kills calls of a three-step function 50 times,
// between and inside its steps, on PostgreSQL, and counts that the
// retries run no stored step again (stepkill.Run).
func TestKilledBetweenSteps(t *testing.T) {
	t.Parallel()
	_, store := setup(t)
	t.Log(stepkill.Run(t, store, stepkill.Config{}))
}
