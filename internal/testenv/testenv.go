// Package testenv holds what this module's test servers (dynalite,
// redis-server, the Lambda Runtime Interface Emulator) share: where the
// module is, and whether a server that cannot run here skips a test or
// fails it.
package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// RequireEnv is the environment variable that turns a test server that
// cannot run here (not installed, cannot be built) into a test failure
// instead of a skip. CI sets it to 1.
const RequireEnv = "IDEMPOTENCY_REQUIRE_INTEGRATION"

// Required reports whether RequireEnv is set to 1.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// SkipUnlessRequired skips the test with err as the reason, or fails it
// when Required.
func SkipUnlessRequired(tb testing.TB, err error) {
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
