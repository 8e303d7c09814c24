package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
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
	// stdoutWidth and stderrWidth are the columns of the terminals the
	// streams are, 0 for other streams.
	stdoutWidth, stderrWidth int
	now                      func() time.Time
	getenv                   func(string) string
}

// systemEnv returns the env of the process.
func systemEnv() *env {
	return &env{
		stdin:          os.Stdin,
		stdout:         os.Stdout,
		stderr:         os.Stderr,
		stdinTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		stderrTerminal: term.IsTerminal(int(os.Stderr.Fd())),
		stdoutWidth:    width(os.Stdout),
		stderrWidth:    width(os.Stderr),
		now:            time.Now,
		getenv:         os.Getenv,
	}
}

// width returns the columns of the terminal f is, or 0.
func width(f *os.File) int {
	if !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	w, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return w
}

// tableWidth returns the columns the command's tables may take with out:
// the terminal's, or defaultWidth for output that is not a terminal's; no
// limit with -o wide.
func (e *env) tableWidth(out *output) int {
	return tableWidth(out, e.stdoutWidth)
}

func tableWidth(out *output, terminal int) int {
	switch {
	case out.wide:
		return 0
	case terminal > 0:
		return terminal
	}
	return defaultWidth
}

// readAll reads r to its end, or until ctx is done: a terminal's stdin
// does not end on Ctrl-C, which cancels ctx.
func readAll(ctx context.Context, r io.Reader) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		done <- result{b, err}
	}()
	select {
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case res := <-done:
		return res.b, res.err
	}
}

// readLine reads a line from r, without its newline, or what r holds
// before its end; it returns early when ctx is done (Ctrl-C at a prompt).
func readLine(ctx context.Context, r io.Reader) (string, error) {
	done := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		done <- strings.TrimRight(line, "\r\n")
	}()
	select {
	case <-ctx.Done():
		return "", context.Cause(ctx)
	case line := <-done:
		return line, nil
	}
}
