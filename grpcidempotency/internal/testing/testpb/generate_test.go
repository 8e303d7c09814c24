package testpb_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// The generators of the committed code, at the versions that made it.
// Change a version here, run `go test ./internal/testing/testpb -update` (with
// protoc installed), and commit the result.
var generators = []struct{ plugin, pkg string }{
	{"protoc-gen-go", "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12"},
	{"protoc-gen-go-grpc", "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2"},
	{"protoc-gen-connect-go", "connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.0"},
}

const (
	module = "github.com/retrysafe/retrysafe/grpcidempotency"
	proto  = "retrysafe/test/orders/v1/orders.proto"
)

var update = flag.Bool("update", false, "write the generated code instead of comparing it")

// The generated files, relative to this directory.
var generated = []string{"orders.pb.go", "orders_grpc.pb.go", "testpbconnect/orders.connect.go"}

// protocVersion matches the lines of the generated headers that name
// protoc's version, which depends on the machine, not on the generators.
var protocVersion = regexp.MustCompile(`(?m)^//.*\bprotoc\s+(v[0-9.]+|\(unknown\)).*\n`)

// TestGeneratedCodeIsCurrent generates the code of
// testdata/proto/.../orders.proto again, with protoc (Debian's
// protobuf-compiler) and the generators at the versions above, and
// compares it with the committed code. Without protoc it skips: the
// committed code is what the tests compile.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc is not installed (apt-get install protobuf-compiler): the generated code is not checked")
	}
	bin := t.TempDir()
	for _, g := range generators {
		cmd := exec.Command("go", "install", g.pkg)
		cmd.Env = append(os.Environ(), "GOBIN="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go install %s: %v\n%s", g.pkg, err, out)
		}
	}
	out := t.TempDir()
	args := []string{"-I", filepath.Join("..", "..", "..", "testdata", "proto")}
	for _, g := range generators {
		name := g.plugin[len("protoc-gen-"):]
		args = append(args,
			"--plugin="+g.plugin+"="+filepath.Join(bin, g.plugin),
			"--"+name+"_out="+out, "--"+name+"_opt=module="+module)
	}
	args = append(args, proto)
	if out, err := exec.Command(protoc, args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc %v: %v\n%s", args, err, out)
	}
	for _, f := range generated {
		want, err := os.ReadFile(filepath.Join(out, "internal", "testing", "testpb", f))
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(protocVersion.ReplaceAll(got, nil), protocVersion.ReplaceAll(want, nil)) {
			t.Errorf("%s is not what the generators make of %s: run go test ./internal/testing/testpb -update, and commit it", f, proto)
		}
	}
}
