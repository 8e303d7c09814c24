package main

import (
	"errors"
	"fmt"
)

// The exit codes, documented in the package comment and the usage text.
const (
	exitOK          = 0
	exitStore       = 1   // the store failed, or does not hold what the flags describe
	exitUsage       = 2   // a bad command line or input
	exitNotFound    = 3   // no record for the key
	exitRefused     = 4   // nothing was released
	exitInterrupted = 130 // 128 + SIGINT, what shells report for a command that Ctrl-C ended
)

// errInterrupted is the cause of the command's context when Ctrl-C ends it.
var errInterrupted = errors.New("interrupted")

// failure is an error with the exit code it ends the command with.
type failure struct {
	code int
	err  error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func fail(code int, format string, args ...any) error {
	return &failure{code, fmt.Errorf(format, args...)}
}

func usageError(format string, args ...any) error { return fail(exitUsage, format, args...) }
func notFound(format string, args ...any) error   { return fail(exitNotFound, format, args...) }
func refused(format string, args ...any) error    { return fail(exitRefused, format, args...) }

// exitCode returns the exit code of err: a failure's own, exitStore for
// any other error (what the store or its SDK returned).
func exitCode(err error) int {
	var f *failure
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &f):
		return f.code
	}
	return exitStore
}
