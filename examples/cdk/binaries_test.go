package main

import (
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
}

func TestPrebuilt(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "payments", "arm64", "bootstrap"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(dir, "orders", "arm64", "bootstrap"), "#!/bin/sh\n", 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "function", "arm64", "bootstrap"), 0o755))
	// The other architecture of `make build` is not the functions'.
	writeFile(t, filepath.Join(dir, "amd64only", "amd64", "bootstrap"), "#!/bin/sh\n", 0o755)

	dirs, err := prebuilt(dir, []string{"payments"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"payments": filepath.Join(dir, "payments", "arm64")}, dirs)

	_, err = prebuilt(dir, []string{"payments", "missing"})
	assert.ErrorContains(t, err, `example "missing"`)
	_, err = prebuilt(dir, []string{"orders"})
	assert.ErrorContains(t, err, "not an executable file")
	_, err = prebuilt(dir, []string{"function"})
	assert.ErrorContains(t, err, "not an executable file")
	_, err = prebuilt(dir, []string{"amd64only"})
	assert.ErrorContains(t, err, `example "amd64only"`)
}

// TestBinariesFromContext checks that the context value "binaries" takes
// the pre-built binaries, and that nothing is built then.
func TestBinariesFromContext(t *testing.T) {
	dir := t.TempDir()
	for _, name := range examples {
		writeFile(t, filepath.Join(dir, name, "arm64", "bootstrap"), "#!/bin/sh\n", 0o755)
	}
	app := awscdk.NewApp(&awscdk.AppProps{
		Outdir:  jsii.String(t.TempDir()),
		Context: &map[string]any{contextBinaries: dir},
	})
	dirs, err := binaries(app)
	require.NoError(t, err)
	assert.Len(t, dirs, len(examples))
	for _, name := range examples {
		assert.Equal(t, filepath.Join(dir, name, "arm64"), dirs[name])
	}

	app = awscdk.NewApp(&awscdk.AppProps{
		Outdir:  jsii.String(t.TempDir()),
		Context: &map[string]any{contextBinaries: 42},
	})
	_, err = binaries(app)
	assert.ErrorContains(t, err, "must be a directory")
}

func TestCheckRoot(t *testing.T) {
	assert.NoError(t, checkRoot(filepath.Join("..", "..")))
	err := checkRoot(t.TempDir())
	assert.ErrorContains(t, err, "-c binaries=DIR")
}

// TestBuild builds a small repository laid out like this one, with the
// examples in a module of their own, and checks that each example becomes
// a lone linux/arm64 executable named bootstrap.
func TestBuild(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "module example.com/app\n\ngo 1.22\n", 0o644)
	writeFile(t, filepath.Join(root, "examples", "go.mod"), "module example.com/app/examples\n\ngo 1.22\n", 0o644)
	writeFile(t, filepath.Join(root, "examples", "hello", "main.go"), "package main\n\nfunc main() {}\n", 0o644)
	out := filepath.Join(root, "dist")
	// A stale file from an earlier build must not be packaged.
	writeFile(t, filepath.Join(out, "hello", "arm64", "stale"), "", 0o644)

	dirs, err := build(root, out, []string{"hello"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"hello": filepath.Join(out, "hello", "arm64")}, dirs)

	entries, err := os.ReadDir(dirs["hello"])
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "bootstrap", entries[0].Name())
	f, err := elf.Open(filepath.Join(dirs["hello"], "bootstrap"))
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, elf.EM_AARCH64, f.Machine)
	assert.Equal(t, elf.ELFOSABI_NONE, f.OSABI) // Linux binaries carry no ABI mark
	fi, err := os.Stat(filepath.Join(dirs["hello"], "bootstrap"))
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode().Perm()&0o111, "executable")

	_, err = build(root, out, []string{"missing"})
	assert.ErrorContains(t, err, "-c binaries=DIR")
	writeFile(t, filepath.Join(root, "examples", "broken", "main.go"), "package main\n\nfunc main() { undefined() }\n", 0o644)
	_, err = build(root, out, []string{"broken"})
	assert.ErrorContains(t, err, `build example "broken"`)
}
