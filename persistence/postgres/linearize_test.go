package postgres_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/testing/linearize"
	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// TestLinearizable: the store's histories are linearizable
// (docs/protocol.md#histories). Many clients write each key, with faults
// at the store interface. Connections are terminated before every 10th
// key, and the server crashes and restarts halfway. LINEARIZE_LONG=1
// (make chaos) makes the run long.
func TestLinearizable(t *testing.T) {
	srv := pgserver.Start(t)
	url := srv.NewDatabase(t)
	ctx := t.Context()
	w := linearize.Workload{Prefix: "linearize", Keys: 100, Clients: 3, Calls: 3, Workers: 4, Seed: uint64(time.Now().UnixNano()), Faults: true}
	if os.Getenv("LINEARIZE_LONG") == "1" {
		w.Keys, w.Calls, w.Workers = 3300, 4, 8
	}
	t.Logf("seed %d", w.Seed)
	var pools []*pgxpool.Pool
	open := func() persistence.Store {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["application_name"] = "linearize"
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if len(pools) == 0 {
			if err := postgres.CreateTable(ctx, pool, "idempotency"); err != nil {
				t.Fatal(err)
			}
		}
		pools = append(pools, pool)
		store, err := postgres.New(pool, "idempotency")
		if err != nil {
			t.Fatal(err)
		}
		return store
	}
	var (
		mu                   sync.Mutex // no termination while the server restarts
		terminated, restarts atomic.Int64
	)
	w.Disrupt = func(k int) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case k == w.Keys/2:
			if err := srv.Restart(ctx); err != nil {
				t.Errorf("restarting the server: %v", err)
			}
			restarts.Add(1)
		case k%10 == 9:
			if _, err := srv.Query(ctx, "postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'linearize'`); err != nil {
				t.Errorf("terminating connections: %v", err)
			}
			terminated.Add(1)
		}
	}
	h, stats := w.Run(ctx, open)
	res, err := linearize.Check(h, time.Minute, dir(t))
	if err != nil {
		t.Fatal(err)
	}
	stats.Faults["connections terminated"] = int(terminated.Load())
	stats.Faults["server restarted"] = int(restarts.Load())
	t.Logf("%d calls on %d keys checked in %v (%d with an unknown outcome); faults %v", res.Calls, res.Keys, res.Took, res.Unknown, stats.Faults)
}

// dir is where a violation's visualization goes.
func dir(t *testing.T) string {
	if d := os.Getenv("LINEARIZE_DIR"); d != "" {
		return d
	}
	return t.TempDir()
}
