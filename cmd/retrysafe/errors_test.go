package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// requireFailure checks that r failed with code and a message on stderr
// that contains want, and nothing else: one line, never a stack trace.
func requireFailure(t *testing.T, r result, code int, want string) {
	t.Helper()
	require.Equal(t, code, r.code, "exit code; stderr:\n%s", r.stderr)
	require.Contains(t, r.stderr, want)
	require.NotContains(t, r.stderr, "goroutine")
	require.Empty(t, r.stdout)
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "event.json")
	require.NoError(t, os.WriteFile(notJSON, []byte("{\n  \"order_id\": 12,\n  amount: 3\n}\n"), 0o644))
	event := filepath.Join("testdata", "events", "charge.json")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"event not JSON", []string{"key", "--prefix", "p", notJSON}, exitUsage, "is not JSON: invalid character 'a' looking for beginning of object key string (line 3, column 3)"},
		{"missing event file", []string{"key", "--prefix", "p", filepath.Join(dir, "missing.json")}, exitUsage, "reading " + filepath.Join(dir, "missing.json")},
		{"bad expression", []string{"key", "--prefix", "p", "--key", "order_id[", event}, exitUsage, `--key: jmespath: invalid expression "order_id["`},
		{"order-dependent expression", []string{"key", "--prefix", "p", "--validation", "values(@)", event}, exitUsage, "depends on the order of object members"},
		{"no key in the event", []string{"key", "--prefix", "p", "--key", "order", event}, exitNotFound, `key expression "order" selected no idempotency key`},
		{"no prefix", []string{"key", event}, exitUsage, "no prefix: give --prefix"},
		{"HTTP flags without --http", []string{"key", "--prefix", "p", "--scope", "principal", event}, exitUsage, "give --http too"},
		{"not an HTTP event", []string{"key", "--prefix", "p", "--http", "auto", event}, exitUsage, "give its kind with --http"},
		{"HTTP request without a key", []string{"key", "--prefix", "p", "--http", "auto", "--header", "X-Request-Id", filepath.Join("testdata", "events", "post-payment.json")},
			exitNotFound, "the adapters answer 400 (Idempotency key required) and keep no record"},
		{"bad scope", []string{"key", "--prefix", "p", "--http", "auto", "--scope", "tenant", filepath.Join("testdata", "events", "post-payment.json")}, exitUsage, `--scope "tenant"`},
		{"unknown flag", []string{"get", "--tabel", "t", "k"}, exitUsage, "flag provided but not defined: --tabel"},
		{"unknown command", []string{"delete", "k"}, exitUsage, `unknown command "delete"`},
		{"no store", []string{"get", "k"}, exitUsage, "no store: give --table"},
		{"two stores", []string{"get", "k", "--table", "t", "--redis", "redis://127.0.0.1:1"}, exitUsage, "give one store"},
		{"bad output", []string{"ls", "-o", "yaml", "--table", "t"}, exitUsage, `want table, wide or json, not "yaml"`},
		{"bad status", []string{"ls", "--status", "DONE", "--table", "t"}, exitUsage, `--status "DONE": want INPROGRESS or COMPLETED`},
		{"release without a terminal", []string{"release", "k", "--table", "t"}, exitUsage, "give --yes to release without asking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("IDEMPOTENCY_TABLE", "")
			requireFailure(t, runCmd(t, tc.args...), tc.code, tc.want)
		})
	}
}

func TestStoreMismatch(t *testing.T) {
	f := dynamoFixture(t)
	putGolden(t, f)
	key := goldenRecords[0].Key
	table := f.flags[1]
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing table", []string{"get", key, "--table", table + "-gone"}, exitStore, `DynamoDB table "` + table + `-gone" in us-east-1 at http://127.0.0.1:`},
		{"other key attribute", []string{"get", key, "--table", table, "--key-attr", "pk"}, exitStore, "exists with key schema [id HASH], the options describe [pk HASH]; give the key attributes"},
		{"a sort key the table lacks", []string{"ls", "--table", table, "--sort-key-attr", "sk"}, exitStore, "the options describe [id HASH][sk RANGE]"},
		{"other status attribute", []string{"get", key, "--table", table, "--status-attr", "state"}, exitStore, "has no status or no expiry: the store names its attributes otherwise"},
		{"other expiry attribute in a listing", []string{"ls", "--table", table, "--expiry-attr", "ttl"}, exitStore, "has no status or no expiry"},
		{"clashing attributes", []string{"get", key, "--table", table, "--status-attr", "data"}, exitUsage, "are both \"data\""},
		{"no record", []string{"get", key + "0", "--table", table}, exitNotFound, "holds no record for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireFailure(t, runAt(t, goldenNow, "", tc.args...), tc.code, tc.want)
		})
	}
}

func TestRedisMismatch(t *testing.T) {
	f := redisFixture(t)
	putGolden(t, f)
	key := goldenRecords[0].Key
	requireFailure(t, runAt(t, goldenNow, "", f.with("get", key, "--status-attr", "state")...), exitStore, "not an idempotency record")
	requireFailure(t, runAt(t, goldenNow, "", f.with("get", key, "--redis-prefix", "idem:")...), exitNotFound, "holds no record")
	requireFailure(t, runAt(t, goldenNow, "", f.with("get", key, "--key-attr", "pk")...), exitUsage, "are for DynamoDB")

	// A server that is gone.
	srv := redisserver.Start(t)
	srv.Stop()
	requireFailure(t, runCmd(t, "stats", "--redis", "redis://"+srv.Addr), exitStore, "Redis at "+srv.Addr)
	requireFailure(t, runCmd(t, "stats", "--redis", "http://"+srv.Addr), exitUsage, "--redis")
}

func TestSortKeyLayout(t *testing.T) {
	f := dynamoFixture(t, func(o *ddbstore.Options) { o.SortKeyAttr, o.StaticPKValue = "sk", "idempotency#orders" })
	putGolden(t, f)
	layout := []string{"--sort-key-attr", "sk", "--pk-function", "orders"}
	r := runAt(t, goldenNow, "", f.with(append([]string{"get", goldenRecords[0].Key}, layout...)...)...)
	requireOK(t, r)
	golden(t, "get-completed.txt", r.stdout)
	r = runAt(t, goldenNow, "", f.with(append([]string{"ls", "--prefix", "refunds.", "-o", "wide"}, layout...)...)...)
	requireOK(t, r)
	require.Contains(t, r.stdout, goldenRecords[4].Key)
	require.NotContains(t, r.stdout, goldenRecords[0].Key)

	// Another function's partition holds none of them.
	r = runAt(t, goldenNow, "", f.with("get", goldenRecords[0].Key, "--sort-key-attr", "sk", "--static-pk", "idempotency#refunds")...)
	requireFailure(t, r, exitNotFound, "holds no record")
}
