package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// The generators of ordersv1, at the versions that made it (those of
// grpcidempotency's test service). Change a version here, run
// `go test -run TestGeneratedCodeIsCurrent -update` (with protoc
// installed), and commit the result.
var generators = []struct{ plugin, pkg string }{
	{"protoc-gen-go", "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12"},
	{"protoc-gen-go-grpc", "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2"},
}

var update = flag.Bool("update", false, "write the generated code instead of comparing it")

// protocVersion matches the lines of the generated headers that name
// protoc's version, which depends on the machine.
var protocVersion = regexp.MustCompile(`(?m)^//.*\bprotoc\s+(v[0-9.]+|\(unknown\)).*\n`)

// TestGeneratedCodeIsCurrent generates ordersv1 again from
// proto/orders/v1/orders.proto, with protoc (Debian's protobuf-compiler)
// and the generators above, and compares it with the committed code.
// Without protoc it skips.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc is not installed (apt-get install protobuf-compiler): the generated code is not checked")
	}
	bin, out := t.TempDir(), t.TempDir()
	args := []string{"-I", "proto"}
	for _, g := range generators {
		cmd := exec.Command("go", "install", g.pkg)
		cmd.Env = append(os.Environ(), "GOBIN="+bin)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go install %s: %v\n%s", g.pkg, err, b)
		}
		name := g.plugin[len("protoc-gen-"):]
		args = append(args, "--plugin="+g.plugin+"="+filepath.Join(bin, g.plugin),
			"--"+name+"_out="+out, "--"+name+"_opt=module=github.com/retrysafe/retrysafe/examples/grpcorders")
	}
	args = append(args, "orders/v1/orders.proto")
	if b, err := exec.Command(protoc, args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc %v: %v\n%s", args, err, b)
	}
	for _, f := range []string{"ordersv1/orders.pb.go", "ordersv1/orders_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if *update {
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
			t.Errorf("%s is not what the generators make of orders.proto: run go test -run TestGeneratedCodeIsCurrent -update, and commit it", f)
		}
	}
}
