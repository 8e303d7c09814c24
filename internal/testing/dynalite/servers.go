package dynalite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// Servers starts the test servers of one kind: one for a test (Start), or
// one shared by the tests of the test binary (Shared, stopped by Main).
// dynalite's Start, Shared and Main are those of a Servers; DynamoDB Local's
// (internal/testing/dynamodblocal) are those of another.
type Servers[S interface{ Stop() error }] struct {
	// Name names the server in messages, such as "dynalite".
	Name string
	// StartContext starts a server, as the package's StartContext does.
	StartContext func(context.Context) (S, error)
	// Unavailable is matched (with errors.Is) by the errors of StartContext
	// that skip the test (or fail it when IDEMPOTENCY_REQUIRE_INTEGRATION=1)
	// instead of failing it: the server is not installed.
	Unavailable error

	once   sync.Once
	shared S
	ok     bool
	err    error
}

// Start starts a server for the test tb and stops it when tb ends. If the
// StartContext error matches Unavailable, it skips tb (fails it when
// IDEMPOTENCY_REQUIRE_INTEGRATION=1); any other error fails tb.
func (ss *Servers[S]) Start(tb testenv.TB) S {
	tb.Helper()
	s, err := ss.StartContext(tb.Context())
	if err != nil {
		ss.skipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("stopping %s: %v", ss.Name, err)
		}
	})
	return s
}

// Shared returns a server shared by every test of the test binary, starting
// it on first use, and handles errors as Start does.
func (ss *Servers[S]) Shared(tb testenv.TB) S {
	tb.Helper()
	ss.once.Do(func() {
		ss.shared, ss.err = ss.StartContext(context.Background())
		ss.ok = ss.err == nil
	})
	if ss.err != nil {
		ss.skipOrFail(tb, ss.err)
	}
	return ss.shared
}

// Main runs the tests of m and then stops the server that Shared started, if
// any, and exits.
func (ss *Servers[S]) Main(m testenv.M) {
	code := m.Run()
	ss.StopShared()
	os.Exit(code)
}

// StopShared stops the server that Shared started, if any, and reports a
// failure to stop it on standard error. It is what Main does once the
// tests have run, for a TestMain that stops the servers of several kinds.
func (ss *Servers[S]) StopShared() {
	if ss.ok {
		if err := ss.shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping %s: %v\n", ss.Name, err)
		}
	}
}

func (ss *Servers[S]) skipOrFail(tb testenv.TB, err error) {
	tb.Helper()
	if errors.Is(err, ss.Unavailable) {
		testenv.SkipUnlessRequired(tb, err)
	}
	tb.Fatal(err)
}
