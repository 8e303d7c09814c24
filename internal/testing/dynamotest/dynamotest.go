// Package dynamotest puts the two DynamoDB-compatible servers of the tests,
// dynalite (internal/testing/dynalite) and DynamoDB Local
// (internal/testing/dynamodblocal), behind one type, with what each can
// do, so that a test, the chaos harness or the comparison runs against
// either, or both, without being written twice.
//
// What each lacks, of what this module uses:
//
//   - dynalite ignores ReturnValuesOnConditionCheckFailure (a failed
//     conditional write never carries the existing item), has no
//     TransactWriteItems, and does not know UpdateTimeToLive. It starts in
//     a moment, on Node.js.
//   - DynamoDB Local has all three. It starts in seconds, on Java; its
//     error responses carry no CRC32 (see internal/testing/dynamodblocal),
//     and its tables are ACTIVE at once, where DynamoDB's (and dynalite's)
//     are CREATING for a moment. On a table with time to live it deletes
//     an expired item about a second after its expiry, where DynamoDB
//     takes up to days: a test that sets up an expired record needs a
//     table without it.
//
// Either kind skips the test that asks for it when it is not installed,
// with a message that says how to install it, and fails it instead when
// IDEMPOTENCY_REQUIRE_INTEGRATION=1.
package dynamotest

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// Server is a running DynamoDB-compatible server, of either kind.
type Server struct {
	// Kind is the kind of server.
	Kind *Kind

	// Endpoint is the server's base URL, such as "http://127.0.0.1:41234".
	Endpoint string

	// Version names the server and its version, such as "dynalite 4.0.0";
	// for an external endpoint, the endpoint.
	Version string

	// External is true when the server was not started here but named by
	// AWS_ENDPOINT_URL_DYNAMODB (dynalite's kind only: see dynalite.Server).
	// It is then taken to behave as DynamoDB does, whatever it is.
	External bool

	// ReturnsOldItem reports whether a conditional write that fails, and
	// asked for ReturnValuesOnConditionCheckFailure ALL_OLD, carries the
	// existing item, as DynamoDB's does. dynalite's do not.
	ReturnsOldItem bool

	// Transactions reports whether the server implements
	// TransactWriteItems. dynalite does not.
	Transactions bool

	impl server
}

// server is what both kinds' servers do.
type server interface {
	NewClient(optFns ...func(*dynamodb.Options)) *dynamodb.Client
	Env() []string
	NewTable(tb testenv.TB, create func(ctx context.Context, client *dynamodb.Client, name string) error) string
	Stop() error
}

// NewClient returns a new DynamoDB client for the server, with its own HTTP
// connections, as a separate Lambda execution environment would have, a
// short retry backoff and no retry quota. optFns adjust its options (a
// dynalite.Counter's Register, a dynalite.Faults' Register).
func (s *Server) NewClient(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return s.impl.NewClient(optFns...)
}

// Env returns environment variables that point an AWS SDK in another
// process (an example function, a Lambda emulator) at the server.
func (s *Server) Env() []string { return s.impl.Env() }

// NewTable creates a table named for tb (dynalite.TableName) through
// create, and returns its name.
func (s *Server) NewTable(tb testenv.TB, create func(ctx context.Context, client *dynamodb.Client, name string) error) string {
	tb.Helper()
	return s.impl.NewTable(tb, create)
}

// Stop stops the server; see the kind's own Stop.
func (s *Server) Stop() error { return s.impl.Stop() }

// Kind is a kind of server: dynalite or DynamoDB Local.
type Kind struct {
	// Name names the kind in subtests, flags and reports: "dynalite" or
	// "dynamodb-local".
	Name string

	// Title names it in prose: "dynalite" or "DynamoDB Local".
	Title string

	startContext func(context.Context) (*Server, error)
	start        func(testenv.TB) *Server
	shared       func(testenv.TB) *Server
	stopShared   func()
}

// StartContext starts a server and returns it; the caller must Stop it.
// It skips and fails nothing; the error matches the kind's ErrUnavailable
// (dynalite.ErrUnavailable, dynamodblocal.ErrUnavailable) when the server
// is not installed.
func (k *Kind) StartContext(ctx context.Context) (*Server, error) {
	s, err := k.startContext(ctx)
	if err != nil {
		return nil, err
	}
	s.Kind = k
	return s, nil
}

// Start starts a server for the test tb and stops it when tb ends, or
// skips tb when the server is not installed (fails it when
// IDEMPOTENCY_REQUIRE_INTEGRATION=1).
func (k *Kind) Start(tb testenv.TB) *Server {
	tb.Helper()
	s := k.start(tb)
	s.Kind = k
	return s
}

// Shared returns the server of this kind shared by every test of the test
// binary, starting it on first use, as Start handles a missing one. Call
// Main from TestMain so that it is stopped.
func (k *Kind) Shared(tb testenv.TB) *Server {
	tb.Helper()
	s := k.shared(tb)
	s.Kind = k
	return s
}

func (k *Kind) String() string { return k.Name }

var (
	// Dynalite is dynalite, on Node.js.
	Dynalite = &Kind{
		Name:  "dynalite",
		Title: "dynalite",
		startContext: func(ctx context.Context) (*Server, error) {
			s, err := dynalite.StartContext(ctx)
			if err != nil {
				return nil, err
			}
			return fromDynalite(s), nil
		},
		start:      func(tb testenv.TB) *Server { tb.Helper(); return fromDynalite(dynalite.Start(tb)) },
		shared:     func(tb testenv.TB) *Server { tb.Helper(); return fromDynalite(dynalite.Shared(tb)) },
		stopShared: dynalite.StopShared,
	}

	// DynamoDBLocal is DynamoDB Local, AWS's own emulator, on Java.
	DynamoDBLocal = &Kind{
		Name:  "dynamodb-local",
		Title: "DynamoDB Local",
		startContext: func(ctx context.Context) (*Server, error) {
			s, err := dynamodblocal.StartContext(ctx)
			if err != nil {
				return nil, err
			}
			return fromDynamoDBLocal(s), nil
		},
		start:      func(tb testenv.TB) *Server { tb.Helper(); return fromDynamoDBLocal(dynamodblocal.Start(tb)) },
		shared:     func(tb testenv.TB) *Server { tb.Helper(); return fromDynamoDBLocal(dynamodblocal.Shared(tb)) },
		stopShared: dynamodblocal.StopShared,
	}

	// Kinds are both kinds, dynalite first.
	Kinds = []*Kind{Dynalite, DynamoDBLocal}
)

func fromDynalite(s *dynalite.Server) *Server {
	v := "dynalite " + s.Version
	if s.External {
		v = s.Endpoint
	}
	// An external endpoint is DynamoDB, DynamoDB Local or LocalStack
	// (which runs DynamoDB Local): all three honour ALL_OLD and have
	// transactions.
	return &Server{Endpoint: s.Endpoint, Version: v, External: s.External,
		ReturnsOldItem: s.External, Transactions: s.External, impl: s}
}

func fromDynamoDBLocal(s *dynamodblocal.Server) *Server {
	return &Server{Endpoint: s.Endpoint, Version: "DynamoDB Local " + s.Version,
		ReturnsOldItem: true, Transactions: true, impl: s}
}

// Lookup returns the kind named name ("dynalite" or "dynamodb-local").
func Lookup(name string) (*Kind, error) {
	var names []string
	for _, k := range Kinds {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	return nil, fmt.Errorf("dynamotest: unknown server %q (want %s)", name, strings.Join(names, " or "))
}

// Main runs the tests of m, then stops the shared server of each kind that
// Shared started, and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
func Main(m testenv.M) {
	code := m.Run()
	for _, k := range Kinds {
		k.stopShared()
	}
	os.Exit(code)
}
