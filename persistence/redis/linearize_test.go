package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/linearize"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
)

// TestLinearizeCatchesAScriptWithoutItsStatusCheck: a release script
// without its status check deletes a completed record. The history of a
// release sent after the completion is then not linearizable. The test
// swaps the script, so it does not run in parallel.
func TestLinearizeCatchesAScriptWithoutItsStatusCheck(t *testing.T) {
	// deleteScript without its first lines, which return -2 for a
	// record that is not in progress.
	saved := deleteScript
	deleteScript = ownScript(`
redis.call('DEL', key)
return 1
`)
	t.Cleanup(func() { deleteScript = saved })

	srv := redisserver.Start(t)
	store, err := New(srv.NewClient())
	if err != nil {
		t.Fatal(err)
	}
	w := linearize.Workload{Prefix: "broken", Keys: 5, Clients: 2, Calls: 2, Workers: 1, Seed: 1}
	h, _ := w.Run(t.Context(), func() persistence.Store { return store })
	_, err = linearize.Check(h, time.Minute, t.TempDir())
	var v *linearize.Violation
	if !errors.As(err, &v) {
		t.Fatalf("Check: %v, want a violation", err)
	}
	t.Log(v)
}
