package main

import (
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// env is what one run of the command sees of the world: tests give it
// their own streams, clock and environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// stdinTerminal and stderrTerminal report whether the streams are
	// terminals: release asks its question on one, ls and stats show
	// their progress on the other.
	stdinTerminal, stderrTerminal bool
	now                           func() time.Time
	getenv                        func(string) string
}

// systemEnv returns the env of the process.
func systemEnv() *env {
	return &env{
		stdin:          os.Stdin,
		stdout:         os.Stdout,
		stderr:         os.Stderr,
		stdinTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		stderrTerminal: term.IsTerminal(int(os.Stderr.Fd())),
		now:            time.Now,
		getenv:         os.Getenv,
	}
}
