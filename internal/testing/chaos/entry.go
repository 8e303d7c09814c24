package chaos

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The flags of Test, registered in every test binary that links the
// package. `make chaos` sets -chaos.long; the short mode, the default,
// runs with every `go test`.
var (
	flagLong     = flag.Bool("chaos.long", false, "run the long mode: new keys until -chaos.duration has passed, per store")
	flagSeed     = flag.Uint64("chaos.seed", 0, "seed of the run (0: a random one, printed)")
	flagDuration = flag.Duration("chaos.duration", 10*time.Minute, "long mode: how long each store is driven")
	flagClients  = flag.Int("chaos.clients", 0, "concurrent clients (0: the mode's default)")
	flagKeys     = flag.Int("chaos.keys", 0, "short mode: keys per client (0: the default)")
	flagEnvs     = flag.Int("chaos.envs", 0, "execution environments (0: the mode's default)")
	flagSkew     = flag.Duration("chaos.skew", -1, "clock skew bound of the environments (-1: the default)")
	flagTimeout  = flag.Duration("chaos.timeout", 0, "invocation deadline, the Lambda timeout (0: the default)")
	flagStores   = flag.String("chaos.stores", "", "comma-separated stores to drive (empty: every store of the test; "+
		"internal/testing/chaos has memory, dynamodb (on dynalite), dynamodb-local (on DynamoDB Local), "+
		"dynamodb-local-tx (on DynamoDB Local, the side effect staged in the completion) and redis; "+
		"persistence/postgres has postgres and postgres-tx (the side effect written in the completion's transaction))")
)

// Test is the body of a TestChaos: it drives each store that -chaos.stores
// names, by default every one of stores, through Run with the
// configuration the flags select, with every driver. newBackend makes the
// backend of a store's name, and fails t for a name it does not know. In
// the short mode the stores run in parallel; in the long mode one after
// another, each with the whole machine. Each store's report is logged, and
// written to $CHAOS_REPORT_DIR/chaos-<store>.txt when that is set; t fails
// on a violation, with the command that runs the same seed again.
func Test(t *testing.T, stores []string, newBackend func(t *testing.T, store string) Backend) {
	cfg := config()
	mode := "short"
	if *flagLong {
		mode = "long"
	}
	if *flagStores != "" {
		stores = strings.Split(*flagStores, ",")
	}
	t.Logf("chaos %s mode, seed %d (rerun with -chaos.seed=%d)", mode, cfg.Seed, cfg.Seed)
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			if !*flagLong {
				t.Parallel()
			}
			t.Logf("seed %d", cfg.Seed)
			backend := newBackend(t, store)
			report, err := Run(t.Context(), cfg, backend, WrapDriver{}, GuardDriver{}, HTTPDriver{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("report:\n%s", report)
			if out := os.Getenv("CHAOS_REPORT_DIR"); out != "" {
				path := filepath.Join(out, "chaos-"+store+".txt")
				if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
					t.Errorf("writing %s: %v", path, err)
				}
			}
			if len(report.Violations) > 0 {
				t.Errorf("%d violations of the invariant (seed %d); reproduce with:\n  %s", len(report.Violations), cfg.Seed, reproduce(store, cfg))
			}
			if report.Keys == 0 || report.SideEffects == 0 {
				t.Errorf("nothing was driven: %d keys, %d side effects", report.Keys, report.SideEffects)
			}
			if report.FinalKeys != report.Keys && t.Context().Err() == nil {
				t.Errorf("%d of %d keys got a final answer", report.FinalKeys, report.Keys)
			}
		})
	}
}

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

// reproduce returns the command that runs store with cfg again, from the
// root of the repository.
func reproduce(store string, cfg Config) string {
	args := []string{testCommand() + " -count=1 -v",
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

// testCommand returns the go test command of the package under test, the
// working directory of the test binary: "go test ./internal/testing/chaos"
// in the repository's root module, "go -C persistence/postgres test ." in
// a module of its own below the root.
func testCommand() string {
	pkg, err := os.Getwd()
	if err != nil {
		return "go test ."
	}
	module := pkg
	for !exists(filepath.Join(module, "go.mod")) {
		up := filepath.Dir(module)
		if up == module {
			return "go -C " + pkg + " test ."
		}
		module = up
	}
	root := module
	for !exists(filepath.Join(root, ".git")) {
		up := filepath.Dir(root)
		if up == root {
			root = module
			break
		}
		root = up
	}
	inModule, _ := filepath.Rel(module, pkg)
	target := "./" + filepath.ToSlash(inModule)
	if inModule == "." {
		target = "."
	}
	if module == root {
		return "go test " + target
	}
	dir, _ := filepath.Rel(root, module)
	return "go -C " + filepath.ToSlash(dir) + " test " + target
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
