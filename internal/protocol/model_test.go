package protocol

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestModel checks the model of the protocol (model/idempotency.pml, over
// model/table.pml) with SPIN in a small configuration: the table holds,
// with reservations held too (WithHoldUntilReleased), and a renewal fenced
// on the token alone, or a reservation that takes a held record over,
// repeats the side effect. It is a quick check of a table just
// regenerated; make model runs the whole check (model/check.sh).
func TestModel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs SPIN and a C compiler")
	}
	for _, tool := range []string{"spin", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("IDEMPOTENCY_REQUIRE_INTEGRATION") == "1" {
				t.Fatalf("%s is required (IDEMPOTENCY_REQUIRE_INTEGRATION=1): %v", tool, err)
			}
			t.Skipf("%s not found: %v", tool, err)
		}
	}
	small := []string{"-DNPROC=2", "-DNATT=1", "-DTMAX=4"}
	for _, c := range []struct {
		name  string
		flags []string
		fail  bool
	}{
		{"table", nil, false},
		{"held", []string{"-DHOLD"}, false},
		{"late renewal", []string{"-DBROKEN_RENEW", "-DONLY_REPEAT"}, true},
		{"held taken over", []string{"-DHOLD", "-DBROKEN_HELD", "-DONLY_REPEAT"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := runModel(t, append(append([]string{}, small...), c.flags...))
			errs := regexp.MustCompile(`errors: (\d+)`).FindStringSubmatch(out)
			if errs == nil {
				t.Fatalf("pan did not finish:\n%s", out)
			}
			switch {
			case c.fail && (errs[1] == "0" || !strings.Contains(out, "assertion violated")):
				t.Errorf("no counterexample; want one:\n%s", out)
			case !c.fail && errs[1] != "0":
				t.Errorf("a counterexample; want none:\n%s", out)
			case !c.fail && strings.Contains(out, "max search depth too small"):
				t.Errorf("the search was cut at its depth limit:\n%s", out)
			}
		})
	}
}

// runModel generates, compiles and runs the model's verifier with spin's
// settings flags, and returns what it printed.
func runModel(t *testing.T, flags []string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"idempotency.pml", "table.pml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "model", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run("spin", append(append([]string{"-a"}, flags...), "idempotency.pml")...)
	run("gcc", "-O0", "-w", "-DSAFETY", "-DNOCLAIM", "-o", "pan", "pan.c")
	return run("./pan", "-m100000", "-w20")
}
