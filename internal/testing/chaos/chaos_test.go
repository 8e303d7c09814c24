package chaos

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The flags of TestChaos. `make chaos` sets -chaos.long; the short mode, the
// default, runs with every `go test`.
var (
	flagLong     = flag.Bool("chaos.long", false, "run the long mode: new keys until -chaos.duration has passed, per store")
	flagSeed     = flag.Uint64("chaos.seed", 0, "seed of the run (0: a random one, printed)")
	flagDuration = flag.Duration("chaos.duration", 10*time.Minute, "long mode: how long each store is driven")
	flagClients  = flag.Int("chaos.clients", 0, "concurrent clients (0: the mode's default)")
	flagKeys     = flag.Int("chaos.keys", 0, "short mode: keys per client (0: the default)")
	flagEnvs     = flag.Int("chaos.envs", 0, "execution environments (0: the mode's default)")
	flagSkew     = flag.Duration("chaos.skew", -1, "clock skew bound of the environments (-1: the default)")
	flagTimeout  = flag.Duration("chaos.timeout", 0, "invocation deadline, the Lambda timeout (0: the default)")
	flagStores   = flag.String("chaos.stores", "memory,dynamodb,dynamodb-local,dynamodb-local-tx,redis", "comma-separated stores to drive: memory, dynamodb (on dynalite), dynamodb-local (on DynamoDB Local), dynamodb-local-tx (on DynamoDB Local, the side effect staged in the completion), redis")
)

// config returns the configuration the flags select, with a seed.
func config() Config {
	cfg := Short()
	if *flagLong {
		cfg = Long(*flagDuration)
	}
	if *flagClients > 0 {
		cfg.Clients = *flagClients
	}
	if *flagKeys > 0 && !*flagLong {
		cfg.Keys = *flagKeys
	}
	if *flagEnvs > 0 {
		cfg.Envs = *flagEnvs
	}
	if *flagSkew >= 0 {
		cfg.SkewBound = *flagSkew
	}
	if *flagTimeout > 0 {
		cfg.Timeout = *flagTimeout
	}
	cfg.Seed = *flagSeed
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	return cfg
}

// reproduce returns the command that runs store with cfg again.
func reproduce(store string, cfg Config) string {
	args := []string{"go test ./internal/testing/chaos -count=1 -v",
		fmt.Sprintf("-run '^TestChaos$/^%s$'", store),
		fmt.Sprintf("-chaos.stores=%s -chaos.seed=%d", store, cfg.Seed),
		fmt.Sprintf("-chaos.clients=%d -chaos.envs=%d -chaos.skew=%v -chaos.timeout=%v", cfg.Clients, cfg.Envs, cfg.SkewBound, cfg.Timeout),
	}
	if *flagLong {
		args = append(args, fmt.Sprintf("-chaos.long -chaos.duration=%v -timeout 0", cfg.Duration))
	} else {
		args = append(args, fmt.Sprintf("-chaos.keys=%d", cfg.Keys))
	}
	return strings.Join(args, " ")
}

func newBackend(t *testing.T, name string) Backend {
	switch name {
	case "memory":
		return Memory()
	case "dynamodb":
		return DynamoDB(t)
	case "dynamodb-local":
		return DynamoDBLocal(t)
	case "dynamodb-local-tx":
		return DynamoDBLocalTransactions(t)
	case "redis":
		return Redis(t)
	}
	t.Fatalf("unknown store %q (want memory, dynamodb, dynamodb-local, dynamodb-local-tx or redis)", name)
	return nil
}

// TestChaos drives Wrap and Guard over each store with injected faults and
// checks the invariant from the log of side effects.
func TestChaos(t *testing.T) {
	cfg := config()
	mode := "short"
	if *flagLong {
		mode = "long"
	}
	t.Logf("chaos %s mode, seed %d (rerun with -chaos.seed=%d)", mode, cfg.Seed, cfg.Seed)
	for _, store := range strings.Split(*flagStores, ",") {
		t.Run(store, func(t *testing.T) {
			if !*flagLong {
				// The long mode gives each store the whole machine in turn.
				t.Parallel()
			}
			t.Logf("seed %d", cfg.Seed)
			backend := newBackend(t, store)
			report, err := Run(t.Context(), cfg, backend, WrapDriver{}, GuardDriver{}, HTTPDriver{})
			require.NoError(t, err)
			t.Logf("report:\n%s", report)
			if out := os.Getenv("CHAOS_REPORT_DIR"); out != "" {
				path := out + "/chaos-" + store + ".txt"
				if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
					t.Errorf("writing %s: %v", path, err)
				}
			}
			if len(report.Violations) > 0 {
				t.Errorf("%d violations of the invariant (seed %d); reproduce with:\n  %s", len(report.Violations), cfg.Seed, reproduce(store, cfg))
			}
			require.Positive(t, report.Keys)
			require.Positive(t, report.SideEffects)
			if report.FinalKeys != report.Keys && t.Context().Err() == nil {
				t.Errorf("%d of %d keys got a final answer", report.FinalKeys, report.Keys)
			}
		})
	}
}
