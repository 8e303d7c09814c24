// Package testenv holds what this module's test servers (dynalite,
// redis-server, the Lambda Runtime Interface Emulator) share: where the
// module is, and whether a server that cannot run here skips a test or
// fails it.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RequireEnv is the environment variable that turns a test server that
// cannot run here (not installed, cannot be built) into a test failure
// instead of a skip. CI sets it to 1.
const RequireEnv = "IDEMPOTENCY_REQUIRE_INTEGRATION"

// StartTimeout bounds how long a test server (dynalite, DynamoDB Local,
// redis-server, PostgreSQL, the Lambda emulator) may take to start and
// answer. A start takes milliseconds to a few seconds on an idle machine,
// and the machines that run the tests are shared: the bound is there only
// to fail a start that hangs, and stays far above a start at ten times
// the load.
const StartTimeout = 5 * time.Minute

// Required reports whether RequireEnv is set to 1.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// TB is the part of testing.TB that the test servers use. The servers
// take a TB rather than a testing.TB, which every *testing.T and *testing.B
// is, so that the programs that run them outside tests (make demo) do not
// link the testing package.
type TB interface {
	Helper()
	Cleanup(func())
	Context() context.Context
	Name() string
	Failed() bool
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// M is the part of testing.M that the servers' Main functions use.
type M interface{ Run() int }

// SkipUnlessRequired skips the test with err as the reason, or fails it
// when Required.
func SkipUnlessRequired(tb TB, err error) {
	tb.Helper()
	if !Required() {
		tb.Skipf("%v (set %s=1 to make this a failure)", err, RequireEnv)
	}
	tb.Fatalf("%v (%s=1 makes this a failure)", err, RequireEnv)
}

// ModuleRoot returns the directory of the go.mod that encloses the working
// directory: where package.json and node_modules live, and where import
// paths of this module resolve.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// RepoRoot returns the directory of the repository's root module,
// github.com/retrysafe/retrysafe, at or above the working directory: where
// package.json, node_modules and the installed test servers live, also
// for the tests of the modules nested in it (examples, bench/compare).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isRootModule(mod) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod of github.com/retrysafe/retrysafe above the working directory")
		}
		dir = parent
	}
}

func isRootModule(gomod []byte) bool {
	for _, line := range bytes.Split(gomod, []byte("\n")) {
		if f := bytes.Fields(line); len(f) == 2 && string(f[0]) == "module" {
			return string(f[1]) == "github.com/retrysafe/retrysafe"
		}
	}
	return false
}

// Seed returns the seed of a test's random choices: the value of the
// environment variable env when it is set (to replay a run), else a new
// one. It logs the seed, with how to replay it.
func Seed(tb TB, env string) uint64 {
	tb.Helper()
	seed := rand.Uint64()
	if v := os.Getenv(env); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			tb.Fatalf("%s=%s: %v", env, v, err)
		}
	}
	tb.Logf("seed %d (%s=%d go test -run '^%s$' replays the choices)", seed, env, seed, strings.SplitN(tb.Name(), "/", 2)[0])
	return seed
}
