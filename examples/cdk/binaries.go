package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// contextBinaries is the context value (cdk deploy -c binaries=DIR) naming
// a directory of pre-built binaries, DIR/<example>/arm64/bootstrap, the
// layout of `make build` (dist/) at the repository root. Without it, the
// app builds them.
const contextBinaries = "binaries"

// arch is the functions' architecture, as GOARCH and as the directory
// between the example and its bootstrap.
const arch = "arm64"

// rootModule is the module the examples belong to.
const rootModule = "github.com/retrysafe/retrysafe"

// binaries returns, for each example, the directory that holds its
// bootstrap executable: under the one the context value "binaries" names,
// or otherwise dist/<example>/arm64 at the repository root (two levels up
// from this app's directory, where the CDK CLI and `go run .` run it), after
// building it there.
func binaries(app awscdk.App) (map[string]string, error) {
	if v := app.Node().TryGetContext(jsii.String(contextBinaries)); v != nil {
		dir, ok := v.(string)
		if !ok || dir == "" {
			return nil, fmt.Errorf("context value %q must be a directory, got %v", contextBinaries, v)
		}
		return prebuilt(dir, examples)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	return build(root, filepath.Join(root, "dist"), examples)
}

// prebuilt checks that dir/<name>/arm64/bootstrap is an executable file for
// each name, and returns those directories.
func prebuilt(dir string, names []string) (map[string]string, error) {
	dirs := make(map[string]string, len(names))
	for _, name := range names {
		d, err := filepath.Abs(filepath.Join(dir, name, arch))
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(filepath.Join(d, "bootstrap"))
		switch {
		case err != nil:
			return nil, fmt.Errorf("pre-built binary of example %q: %w", name, err)
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
			return nil, fmt.Errorf("pre-built binary of example %q: %s is not an executable file", name, filepath.Join(d, "bootstrap"))
		}
		dirs[name] = d
	}
	return dirs, nil
}

// checkRoot makes sure root is the retrysafe module, so that the app run
// from another directory fails with a clear message instead of building
// something else.
func checkRoot(root string) error {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(gomod, []byte("module "+rootModule+"\n")) {
		return fmt.Errorf("%s is not the root of %s: run the app from examples/cdk, or give pre-built binaries with -c %s=DIR",
			root, rootModule, contextBinaries)
	}
	return nil
}

// build compiles root/examples/<name> into out/<name>/arm64/bootstrap for
// each name, for the functions' runtime (provided.al2023 on arm64), as
// `make build` does, and returns the directories out/<name>/arm64.
//
// The build is reproducible (-trimpath, no VCS stamp), so an unchanged
// program gives the same asset hash and is not uploaded or redeployed
// again.
func build(root, out string, names []string) (map[string]string, error) {
	dirs := make(map[string]string, len(names))
	for _, name := range names {
		src := filepath.Join(root, "examples", name)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("example %q not found at %s: give pre-built binaries with -c %s=DIR", name, src, contextBinaries)
		}
		dir := filepath.Join(out, name, arch)
		// The asset is the whole directory: nothing but bootstrap goes in.
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		// The examples are a module of their own, in root/examples.
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-tags", "lambda.norpc", "-ldflags=-s -w",
			"-o", filepath.Join(dir, "bootstrap"), "./"+name)
		cmd.Dir = filepath.Join(root, "examples")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build example %q: %w\n%s", name, err, msg)
		}
		dirs[name] = dir
	}
	return dirs, nil
}
