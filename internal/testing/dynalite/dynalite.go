// Package dynalite runs dynalite, an open-source DynamoDB-compatible server
// on Node.js, for the integration tests and benchmarks of this module, and
// provides the test doubles that go with it: a request-counting SDK
// middleware (Counter) and an HTTP transport that injects faults (Faults).
//
// dynalite is pinned by package.json and package-lock.json at the module
// root; install it with
//
//	npm ci
//
// Start and Shared start a server on a free loopback port (127.0.0.1 only),
// backed by memory, and stop it when the test or the test binary ends. When
// Node.js or the dynalite package is missing they skip the test with a
// message saying how to install it, unless IDEMPOTENCY_REQUIRE_INTEGRATION=1
// is set, in which case they fail it.
//
// When AWS_ENDPOINT_URL_DYNAMODB is set, no server is started: the tests run
// against that endpoint instead (DynamoDB Local, LocalStack, or DynamoDB
// itself), with credentials and region from the SDK's usual sources. See
// Server.External.
//
// Launch and Servers, which start and share dynalite, do the same for
// DynamoDB Local, the other local server (internal/testing/dynamodblocal).
//
// Known differences between dynalite 4.0.0 and DynamoDB: tables are created
// asynchronously (poll DescribeTable until ACTIVE), ReturnValuesOnConditionCheckFailure
// is ignored (a failed condition never carries the existing item),
// UpdateTimeToLive is an unknown operation, and table names need at least 3
// characters.
package dynalite

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// EndpointEnv is the environment variable, honoured by the AWS SDK's own
// configuration loading, that points DynamoDB clients at another endpoint.
// When it is set, Start and Shared use that endpoint instead of starting
// dynalite.
const EndpointEnv = "AWS_ENDPOINT_URL_DYNAMODB"

// Region is the region the clients of a local server are configured with.
const Region = "us-east-1"

// ErrUnavailable is matched (with errors.Is) by the error StartContext
// returns when Node.js or the dynalite package is not installed.
var ErrUnavailable = errors.New("dynalite: not installed")

// Server is a running dynalite, or an external endpoint (see External).
type Server struct {
	// Endpoint is the server's base URL, such as "http://127.0.0.1:41234".
	Endpoint string

	// External is true when the server was not started here but named by
	// AWS_ENDPOINT_URL_DYNAMODB. It may then be DynamoDB Local, LocalStack or
	// DynamoDB itself, which differ from dynalite (for example, they return
	// the existing item on a failed condition); tests that depend on
	// dynalite's behaviour should check what the server does instead of
	// assuming.
	External bool

	// Version is the version of the dynalite package, or "" when External.
	Version string

	cfg  aws.Config
	proc *Process
}

var servers = &Servers[*Server]{Name: "dynalite", StartContext: StartContext, Unavailable: ErrUnavailable}

// Start starts a server for the test tb and stops it when tb ends. If Node.js
// or dynalite is not installed, it skips tb (fails it when
// IDEMPOTENCY_REQUIRE_INTEGRATION=1). Any other failure to start fails tb.
func Start(tb testenv.TB) *Server {
	tb.Helper()
	return servers.Start(tb)
}

// Shared returns a server shared by every test of the test binary, starting
// it on first use. Call Main from TestMain so that it is stopped when the
// tests end; the server also exits by itself when the test binary does.
// Missing Node.js or dynalite is handled as in Start.
func Shared(tb testenv.TB) *Server {
	tb.Helper()
	return servers.Shared(tb)
}

// Main runs the tests of m and then stops the server that Shared started, if
// any, and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { dynalite.Main(m) }
func Main(m testenv.M) { servers.Main(m) }

// StopShared stops the server that Shared started, if any: Main's end,
// for a TestMain that also stops other servers.
func StopShared() { servers.StopShared() }

// StartContext starts a server and returns it; the caller must Stop it. It
// does not skip or fail anything, so TestMain and benchmarks can use it. The
// error matches ErrUnavailable when Node.js or dynalite is not installed.
// ctx bounds the start only, not the server's life.
func StartContext(ctx context.Context) (*Server, error) {
	if ep := os.Getenv(EndpointEnv); ep != "" {
		return external(ep), nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w: Node.js (20 or later) is not on PATH: %v", ErrUnavailable, err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	pkg := filepath.Join(root, "node_modules", "dynalite")
	version, err := packageVersion(filepath.Join(pkg, "package.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v; run `npm ci` in %s", ErrUnavailable, err, root)
	}

	ctx, cancel := context.WithTimeout(ctx, testenv.StartTimeout)
	defer cancel()

	cmd := exec.Command(node, "-e", launcher, pkg)
	cmd.Dir = root
	proc, err := Launch(ctx, "dynalite", cmd, nil)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint: "http://127.0.0.1:" + strconv.Itoa(proc.Port),
		Version:  version,
		proc:     proc,
	}
	s.cfg = LocalConfig(s.Endpoint)
	return s, nil
}

// launcher runs dynalite in memory on 127.0.0.1, on a port the kernel picks
// (so that parallel test processes never race for one), prints that port,
// and exits when its standard input closes, that is, when the Go process
// that started it ends, however it ends. Tables take 50 ms to become ACTIVE:
// short, but asynchronous as in DynamoDB.
//
// dynalite 4.0.0 rethrows the error of a request whose client closed the
// connection before sending the whole body (ECONNRESET, "aborted"), which
// would end the process: a test whose context expires in the middle of a
// request would take the server down for every test that shares it. Such a
// request was never handled, so the launcher ignores that error.
const launcher = `
process.on('uncaughtException', (err) => {
  if (err && err.code === 'ECONNRESET') return;
  console.error(err);
  process.exit(1);
});
const dynalite = require(process.argv[1]);
const server = dynalite({ createTableMs: 50, deleteTableMs: 50, updateTableMs: 50 });
server.on('error', (err) => { console.error(err); process.exit(1); });
server.listen(0, '127.0.0.1', () => { process.stdout.write('listening ' + server.address().port + '\n'); });
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
`

// external returns the server that EndpointEnv names, with the region
// and credentials of the environment (AWS_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), or the local ones without
// them: DynamoDB Local and LocalStack accept any credentials.
func external(endpoint string) *Server {
	cfg := LocalConfig(endpoint)
	if region := cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")); region != "" {
		cfg.Region = region
	}
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}
		cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })
	}
	return &Server{Endpoint: endpoint, External: true, cfg: cfg}
}

// Credentials are the static credentials of the clients of a local
// server, which accepts any.
var Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "local test server"}, nil
})

// LocalConfig returns the AWS configuration of a local server at endpoint:
// the region Region, dummy credentials, and a retryer with short backoff
// delays and no retry quota.
func LocalConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  Credentials,
		BaseEndpoint: aws.String(endpoint),
		Retryer:      testRetryer,
	}
}

// testRetryer is the SDK's standard retryer (3 attempts) with short backoff
// delays and no client-side retry quota, so that tests of throttling and
// lost replies do not wait seconds or run out of retry tokens.
func testRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.NewExponentialJitterBackoff(20 * time.Millisecond)
		o.RateLimiter = ratelimit.None
	})
}

// Config returns an AWS configuration for the server: its endpoint, region,
// dummy credentials (real ones when External) and a retryer with short
// backoff delays. Each client made from it gets its own HTTP client.
func (s *Server) Config() aws.Config { return s.cfg.Copy() }

// NewClient returns a new DynamoDB client for the server, with its own HTTP
// connections, as a separate Lambda execution environment would have. optFns
// adjust the client's options (for example, Counter.Register or an
// HTTPClient with Faults).
func (s *Server) NewClient(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(s.Config(), optFns...)
}

// Env returns environment variables that point an AWS SDK in another process
// (an example function, a Lambda emulator) at the server.
func (s *Server) Env() []string {
	if s.External {
		return []string{EndpointEnv + "=" + s.Endpoint}
	}
	return []string{
		EndpointEnv + "=" + s.Endpoint,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=dynalite",
		"AWS_SECRET_ACCESS_KEY=dynalite",
	}
}

// Stop kills the server and waits for it to exit. It may be called more than
// once; it does nothing for an External server.
func (s *Server) Stop() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.Stop()
}

var versionRE = regexp.MustCompile(`"version"\s*:\s*"([^"]+)"`)

func packageVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the dynalite package is not installed (%v)", err)
	}
	m := versionRE.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("no version in %s", path)
	}
	return string(m[1]), nil
}

// NewTable creates a table named for tb (TableName) through create, and
// returns its name. On an External server the table is deleted when tb
// ends; dynalite's tables vanish with the server.
func (s *Server) NewTable(tb testenv.TB, create func(ctx context.Context, client *dynamodb.Client, name string) error) string {
	tb.Helper()
	name := TableName(tb)
	admin := s.NewClient()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := create(ctx, admin, name); err != nil {
		tb.Fatalf("creating table %s: %v", name, err)
	}
	if s.External {
		tb.Cleanup(func() {
			if _, err := admin.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}); err != nil {
				tb.Logf("deleting table %s: %v", name, err)
			}
		})
	}
	return name
}

var tableNameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// TableName returns a table name unique to this call, derived from the name
// of tb: valid for DynamoDB and dynalite (3 to 255 characters of
// [a-zA-Z0-9_.-]), so that tests sharing a server never share a table.
func TableName(tb testenv.TB) string {
	name := tableNameUnsafe.ReplaceAllString(tb.Name(), "-")
	if len(name) > 200 {
		name = name[:200]
	}
	return "t-" + name + "-" + strings.ToLower(rand.Text()[:10])
}

// limitedWriter keeps the first n bytes written to it and discards the rest.
type limitedWriter struct {
	mu  sync.Mutex
	buf strings.Builder
	n   int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		k := min(len(p), l.n)
		l.buf.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.buf.String())
}
