package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
	pgstore "github.com/retrysafe/retrysafe/persistence/postgres"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// mainEnv makes the test binary run the command itself, for the tests
// that run it as a process of its own, on a pseudo-terminal.
const mainEnv = "RETRYSAFE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
	}
	dynamotest.Main(stopsPostgres{m})
}

// stopsPostgres runs the tests, then stops the PostgreSQL server that
// pgserver.Shared started, if any.
type stopsPostgres struct{ m *testing.M }

func (s stopsPostgres) Run() int {
	code := s.m.Run()
	pgserver.StopShared()
	return code
}

// result is what a run of the command wrote, and its exit code.
type result struct {
	code           int
	stdout, stderr string
}

// runAt runs the command in the process with args, stdin and the clock
// at now, with neither stream a terminal.
func runAt(t *testing.T, now time.Time, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin:  strings.NewReader(stdin),
		stdout: &stdout,
		stderr: &stderr,
		now:    func() time.Time { return now },
		getenv: os.Getenv,
	}
	code := run(t.Context(), e, args)
	return result{code, stdout.String(), stderr.String()}
}

// runCmd runs the command with args, now.
func runCmd(t *testing.T, args ...string) result {
	t.Helper()
	return runAt(t, time.Now(), "", args...)
}

// requireOK fails the test unless r succeeded.
func requireOK(t *testing.T, r result) {
	t.Helper()
	require.Equal(t, exitOK, r.code, "exit code; stderr:\n%s", r.stderr)
}

// fixture is a store that tests write records to through the library,
// with the command's flags that name it.
type fixture struct {
	name  string
	store persistence.Store
	flags []string
	// shown is how the command's messages name the store, up to its
	// table's or server's name: "DynamoDB table", "Redis at".
	shown string
}

// with returns args followed by the fixture's flags.
func (f *fixture) with(args ...string) []string { return append(args, f.flags...) }

// forEachStore runs test against a fresh DynamoDB table on dynalite, a
// fresh redis-server, and a fresh database of a PostgreSQL server.
func forEachStore(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("DynamoDB", func(t *testing.T) { test(t, dynamoFixture(t)) })
	t.Run("Redis", func(t *testing.T) { test(t, redisFixture(t)) })
	t.Run("PostgreSQL", func(t *testing.T) { test(t, postgresFixture(t)) })
}

// dynamoFixture creates a table on the shared dynalite and points the
// SDK's configuration, which the command loads, at it.
func dynamoFixture(t *testing.T, optFns ...func(*ddbstore.Options)) *fixture {
	t.Helper()
	srv := dynalite.Shared(t)
	awsEnv(t, srv)
	table := srv.NewTable(t, func(ctx context.Context, c *awsdynamodb.Client, name string) error {
		return ddbstore.CreateTable(ctx, c, name, optFns...)
	})
	s, err := ddbstore.New(srv.NewClient(), table, optFns...)
	require.NoError(t, err)
	return &fixture{name: "DynamoDB", store: s, flags: []string{"--table", table}, shown: "DynamoDB table"}
}

// awsEnv sets the environment of the SDK for srv, and nothing of the
// machine's own AWS configuration.
func awsEnv(t *testing.T, srv *dynalite.Server) {
	t.Helper()
	awsEnvOf(t, srv.Env())
}

// awsEnvOf sets the environment of the SDK to env, a server's, and
// nothing of the machine's own AWS configuration.
func awsEnvOf(t *testing.T, env []string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("IDEMPOTENCY_TABLE", "")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// redisFixture starts a redis-server.
func redisFixture(t *testing.T) *fixture {
	t.Helper()
	srv := redisserver.Start(t)
	s, err := redisstore.New(srv.NewClient())
	require.NoError(t, err)
	return &fixture{name: "Redis", store: s, flags: []string{"--redis", "redis://" + srv.Addr}, shown: "Redis at"}
}

// postgresFixture creates a database of its own on the shared PostgreSQL
// server, with the records' table that CreateTable makes (in its schema,
// which it creates, when the options name one).
func postgresFixture(t *testing.T, optFns ...func(*pgstore.Options)) *fixture {
	t.Helper()
	url := pgserver.Shared(t).NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var o pgstore.Options
	for _, fn := range optFns {
		fn(&o)
	}
	if o.Schema != "" {
		_, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{o.Schema}.Sanitize())
		require.NoError(t, err)
	}
	require.NoError(t, pgstore.CreateTable(t.Context(), pool, "idempotency", optFns...))
	s, err := pgstore.New(pool, "idempotency", optFns...)
	require.NoError(t, err)
	return &fixture{name: "PostgreSQL", store: s, flags: []string{"--postgres", url}, shown: "PostgreSQL table"}
}
