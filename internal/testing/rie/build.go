package rie

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// Module and Version pin the emulator that Binary builds, from the Go module
// proxy. The version is the pseudo-version the proxy serves for the
// emulator's main branch; the module publishes no tags.
const (
	// Module is the emulator's module path.
	Module = "github.com/aws/aws-lambda-runtime-interface-emulator"
	// Version is the emulator's version.
	Version = "v0.0.0-20261030222936-bef5c4ba774d"
)

// BinaryEnv names an aws-lambda-rie binary to use instead of building one,
// for machines without access to the Go module proxy.
const BinaryEnv = "IDEMPOTENCY_RIE_BINARY"

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the emulator's aws-lambda-rie binary. It is
// built once per machine with `go install` of Module at Version, into a
// directory of the Go build cache (go env GOCACHE), and reused from there;
// BinaryEnv overrides it. The error matches ErrUnavailable when the binary
// cannot be had: no go command, no module proxy, a failed build.
func Binary(ctx context.Context) (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrUnavailable, BinaryEnv, p, err)
		}
		return p, nil
	}
	binary.once.Do(func() { binary.path, binary.err = buildBinary(ctx) })
	return binary.path, binary.err
}

func buildBinary(ctx context.Context) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: the go command is not on PATH: %v", ErrUnavailable, err)
	}
	cache, err := goEnv(ctx, goCmd, "GOCACHE")
	if err != nil || cache == "" || cache == "off" {
		return "", fmt.Errorf("%w: no Go build cache to keep the emulator in (go env GOCACHE: %q, %v)", ErrUnavailable, cache, err)
	}
	dir := filepath.Join(cache, "retrysafe", "aws-lambda-rie", Version, runtime.GOOS+"_"+runtime.GOARCH)
	path := filepath.Join(dir, "aws-lambda-rie")
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// Install into a directory of our own, then rename: test binaries of
	// several packages may build at the same time, and each must only ever
	// see a complete binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, goCmd, "install", Module+"/cmd/aws-lambda-rie@"+Version)
	cmd.Env = installEnv(tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: go install %s/cmd/aws-lambda-rie@%s (it needs the Go module proxy, or the module in the module cache; or set %s): %v\n%s",
			ErrUnavailable, Module, Version, BinaryEnv, err, strings.TrimSpace(out.String()))
	}
	if err := os.Rename(filepath.Join(tmp, "aws-lambda-rie"), path); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return path, nil
}

// installEnv is the environment of the emulator's install into gobin.
func installEnv(gobin string) []string {
	return append(os.Environ(),
		"GOBIN="+gobin,
		"GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0",
		// The module's flags (-mod=vendor, a workspace) must not leak into
		// the install of another module.
		"GOFLAGS=", "GOWORK=off",
		// Nor the toolchain that the tests run with (make test-go1.25 runs
		// them with the oldest Go the library supports): the emulator's
		// go.mod asks for a later Go, which the go command then uses.
		"GOTOOLCHAIN=auto",
	)
}

func goEnv(ctx context.Context, goCmd, name string) (string, error) {
	out, err := exec.CommandContext(ctx, goCmd, "env", name).Output()
	return strings.TrimSpace(string(out)), err
}

// BuildFunction builds the main package pkg as a Lambda function for the
// host, the way `make build` builds the examples for Lambda except for the
// target: CGO_ENABLED=0, -tags lambda.norpc, -trimpath, -ldflags="-s -w".
// pkg is an import path of the module of the working directory, a
// directory relative to that module's root ("./function"), or an absolute
// directory, in whichever module holds it. It writes dir/bootstrap and
// returns its path.
func BuildFunction(ctx context.Context, pkg, dir string) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("rie: the go command is not on PATH: %w", err)
	}
	out, err := filepath.Abs(filepath.Join(dir, "bootstrap"))
	if err != nil {
		return "", err
	}
	target, workDir := pkg, ""
	if root, err := testenv.ModuleRoot(); err == nil {
		workDir = root
	}
	switch {
	// Build in the package's own directory, so that the go command finds
	// the module that holds it.
	case filepath.IsAbs(pkg):
		target, workDir = ".", pkg
	case strings.HasPrefix(pkg, "./"):
		target, workDir = ".", filepath.Join(workDir, pkg)
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, target)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	cmd.Dir = workDir
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("rie: go build %s: %w\n%s", pkg, err, bytes.TrimSpace(msg))
	}
	return out, nil
}
