package idempotency_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// misplaced are programs that give an option where it does not apply:
// each must fail to build, with the compiler naming the kind it wanted.
var misplaced = map[string]struct {
	code string
	want string // the kind of option the entry point takes
}{
	"an HTTP option to Wrap": {
		`_, _ = idempotency.Wrap(handle, store, httpapi.WithHeader("X-Key"))`, "idempotency.WrapOption"},
	"a batch option to Wrap": {
		`_, _ = idempotency.Wrap(handle, store, batch.WithParallelism(2))`, "idempotency.WrapOption"},
	"a key option to NewGuard": {
		`_, _ = idempotency.NewGuard(store, idempotency.WithKey("order_id"))`, "idempotency.GuardOption"},
	"a response hook to NewGuard": {
		`_, _ = idempotency.NewGuard(store, idempotency.WithResponseHook(func(_ context.Context, s string, _ *persistence.Record) string { return s }))`, "idempotency.GuardOption"},
	"transactions to Middleware": {
		`_, _ = httpapi.Middleware(store, idempotency.WithTransactions())`, "idempotency.MiddlewareOption"},
	"a key option to Middleware": {
		`_, _ = httpapi.Middleware(store, idempotency.WithKey("order_id"))`, "idempotency.MiddlewareOption"},
	"a Middleware option to a Lambda handler": {
		`_, _ = httpapi.WrapAPIGatewayV2(api, store, httpapi.WithMaxBodySize(1))`, "idempotency.HandlerOption"},
	"an HTTP option to a batch handler": {
		`_, _ = batch.SQS(record, store, httpapi.WithHeader("X-Key"))`, "idempotency.BatchOption"},
}

// placed is a program that gives every option where it applies: it builds,
// so that the failures above are the options', not the harness's.
const placed = `
	_, _ = idempotency.Wrap(handle, store, idempotency.WithKey("order_id"), idempotency.WithTransactions(), idempotency.WithExpiry(time.Hour),
		idempotency.WithResponseHook(func(_ context.Context, s string, _ *persistence.Record) string { return s }))
	_, _ = idempotency.NewGuard(store, idempotency.WithTransactions(), idempotency.WithLease(time.Minute))
	_, _ = httpapi.WrapAPIGatewayV2(api, store, httpapi.WithHeader("X-Key"), idempotency.WithTransactions(), idempotency.WithWait(time.Second))
	_, _ = httpapi.Middleware(store, httpapi.WithHeader("X-Key"), httpapi.WithMaxBodySize(1), idempotency.WithExpiry(time.Hour))
	_, _ = batch.SQS(record, store, batch.WithParallelism(2), idempotency.WithKey("messageId"), idempotency.WithTransactions())
`

// TestMisplacedOptionsDoNotCompile builds small programs against this
// module: an option given where it does not apply is a compile error.
func TestMisplacedOptionsDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rootMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// The module's own requirements, so that the programs build from the
	// module cache, as the module's tests do.
	requires := regexp.MustCompile(`(?s)require \(.*?\)`).FindAllString(string(rootMod), -1)
	mod := "module example.com/misplaced\n\ngo 1.25\n\nrequire github.com/retrysafe/retrysafe v0.0.0\n\n" +
		strings.Join(requires, "\n") + "\n\nreplace github.com/retrysafe/retrysafe => " + root + "\n"
	write(t, filepath.Join(dir, "go.mod"), mod)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sum))

	build := func(t *testing.T, name, code string) (string, error) {
		pkg := filepath.Join(dir, name)
		write(t, filepath.Join(pkg, "main.go"), program(code))
		cmd := exec.Command(goCmd, "build", "-o", os.DevNull, ".")
		cmd.Dir = pkg
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := build(t, "placed", placed); err != nil {
		t.Fatalf("the options given where they apply do not build: %v\n%s", err, out)
	}
	i := 0
	for name, m := range misplaced {
		i++
		t.Run(name, func(t *testing.T) {
			out, err := build(t, "misplaced"+string(rune('a'+i)), m.code)
			if err == nil {
				t.Fatalf("builds:\n%s", m.code)
			}
			if !strings.Contains(out, "does not implement "+m.want) {
				t.Errorf("the compiler's error does not name %s:\n%s", m.want, out)
			}
		})
	}
}

func program(body string) string {
	return `package main

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

var (
	_ = time.Hour
	_ persistence.Record
)

func handle(context.Context, string) (string, error) { return "", nil }

func api(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{}, nil
}

func record(context.Context, events.SQSMessage) error { return nil }

func main() {
	store := memory.New()
	` + body + `
}
`
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
