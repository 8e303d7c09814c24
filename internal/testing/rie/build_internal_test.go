package rie

import (
	"os/exec"
	"strings"
	"testing"
)

// The emulator is built with the go command's own toolchain, or the later
// one its go.mod asks for, whatever GOTOOLCHAIN the tests run with: the run
// with the oldest Go the library supports (GOTOOLCHAIN=go1.25.5) may be the
// first to need it, and the emulator needs a later Go.
func TestInstallIgnoresTheTestsToolchain(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	local, err := exec.Command(goCmd, "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOTOOLCHAIN", "go1.25.5+local")
	cmd := exec.Command(goCmd, "env", "GOVERSION")
	cmd.Env = installEnv(t.TempDir())
	got, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != strings.TrimSpace(string(local)) {
		t.Errorf("the install would run %s, not the go command's own %s", got, local)
	}
}
