package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

func TestMain(m *testing.M) { pgserver.Main(m) }

// The demo's scenario goes as expected, on a database of its own and
// again on the same one, whose ledger then holds the first run's rows.
func TestDemo(t *testing.T) {
	url := pgserver.Shared(t).NewDatabase(t)
	for attempt := range 2 {
		var out bytes.Buffer
		ok, err := run(t.Context(), &out, url)
		require.NoError(t, err, out.String())
		require.True(t, ok, "run %d:\n%s", attempt+1, out.String())
		shown := out.String()
		require.NotContains(t, shown, "UNEXPECTED")
		for _, want := range []string{"1 a payment", "(replayed)", "503 payment-not-made", "409 key-in-use", "3 keys, 3 ledger rows"} {
			require.Contains(t, shown, want)
		}
		if attempt == 0 {
			t.Logf("\n%s", shown)
		}
	}
}

// make demo-postgres runs the demo.
func TestMakeDemoPostgres(t *testing.T) {
	makeCmd, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make:", err)
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	out, err := exec.Command(makeCmd, "-C", root, "-n", "demo-postgres").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.Contains(string(out), "run ./httpserver/pgdemo"), "%s", out)
}
