//go:build !unix

package pgserver

import (
	"errors"
	"os/exec"
)

// Where there are no unix credentials and signals, the server runs as the
// current user and is killed outright.

func setCredential(*exec.Cmd, *credential) {}

func setProcAttr(*exec.Cmd) {}

func quit(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func signalServer(*exec.Cmd, bool) error {
	return errors.New("pgserver: no SIGSTOP and SIGCONT on this system")
}
