package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/rie"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// make demo installs DynamoDB Local, which the transactions step runs on,
// as it installs dynalite.
func TestMakeDemoInstallsDynamoDBLocal(t *testing.T) {
	makeCmd, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make:", err)
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	// -n prints what make would run, -B as on a fresh machine.
	out, err := exec.Command(makeCmd, "-C", root, "-n", "-B", "demo").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "npm ci")
	require.Contains(t, string(out), "./scripts/install-dynamodb-local.sh")
	require.Contains(t, string(out), "run ./payments/demo")
}

// Without Java, the demo runs every step but the one on DynamoDB Local,
// which it reports as skipped, saying what to install.
func TestDemoWithoutJava(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole demo takes about a minute")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Log("no Java here in the first place")
	}
	t.Setenv("PATH", pathWithout(t, "java"))

	var out bytes.Buffer
	ok, err := run(t.Context(), &out, false)
	if errors.Is(err, dynalite.ErrUnavailable) || errors.Is(err, rie.ErrUnavailable) {
		testenv.SkipUnlessRequired(t, err)
	}
	require.NoError(t, err, out.String())
	require.True(t, ok, out.String())
	shown := out.String()
	var step12 string
	for _, line := range strings.Split(shown, "\n") {
		if strings.HasPrefix(line, "12 ") {
			step12 = line
		}
	}
	require.Contains(t, step12, "skipped: no Java (see below)", shown)
	require.True(t, strings.HasSuffix(strings.TrimSpace(step12), "SKIP"), step12)
	require.Contains(t, shown, "Step 12 was skipped: DynamoDB Local, the server of the transactions, runs on Java 11 or later, "+
		"which is not installed. Install Java (`apt-get install default-jre-headless`")
	for _, line := range strings.Split(shown, "\n") {
		if len(line) > 2 && line[0] >= '1' && line[0] <= '9' && !strings.HasPrefix(line, "12 ") && strings.Contains(line, "  ") {
			require.True(t, strings.HasSuffix(strings.TrimSpace(line), "OK"), "every other step ran: %q", line)
		}
	}
	require.Contains(t, shown, "Every expectation held.")
}

// pathWithout returns a PATH of one directory that holds links to what
// the PATH holds, but the program name.
func pathWithout(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			link := filepath.Join(dir, e.Name())
			if e.Name() == name || e.IsDir() {
				continue
			}
			if _, err := os.Lstat(link); err == nil {
				continue // the first on the PATH wins
			}
			require.NoError(t, os.Symlink(filepath.Join(d, e.Name()), link))
		}
	}
	return dir
}
