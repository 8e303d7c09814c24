package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one subcommand.
type command struct {
	name, args, summary string
	// flags registers the command's flags and returns what runs it with
	// the positional arguments.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
	// about, when set, explains more than the summary, after it.
	about string
}

var commands = []*command{keyCommand, getCommand, lsCommand, statsCommand, releaseCommand}

const usageText = `retrysafe finds, lists and releases the records of the idempotency library
github.com/retrysafe/retrysafe.

usage:
%s
The store is a DynamoDB table (--table, or IDEMPOTENCY_TABLE; the SDK's
configuration: --profile, --region, AWS_ENDPOINT_URL_DYNAMODB) or Redis or
Valkey (--redis URL, --cluster). 'retrysafe help COMMAND' lists a command's
flags.

exit codes:
  0  success
  1  the store failed, or does not hold what the flags describe
  2  usage: a bad flag, an event that is not JSON, a bad expression
  3  no record: none for the key, or the library keeps none for the event
  4  refused: nothing was released (the record changed, it is completed
     and --force was not given, or the answer was not yes)
`

// run runs the command line args (without the program name) and returns
// the exit code. Errors go to e.stderr, with the command's name.
func run(ctx context.Context, e *env, args []string) (code int) {
	defer func() {
		// A bug must not show operators a stack trace instead of a message.
		if v := recover(); v != nil {
			fmt.Fprintf(e.stderr, "retrysafe: internal error: %v\n", v)
			code = exitStore
		}
	}()
	if len(args) == 0 {
		printUsage(e.stderr)
		return exitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			printUsage(e.stdout)
			return exitOK
		}
		name, args = args[0], []string{"-h"}
	}
	for _, c := range commands {
		if c.name == name {
			err := c.run(ctx, e, args)
			if err != nil {
				fmt.Fprintf(e.stderr, "retrysafe %s: %v\n", c.name, err)
			}
			return exitCode(err)
		}
	}
	fmt.Fprintf(e.stderr, "retrysafe: unknown command %q\n\n", name)
	printUsage(e.stderr)
	return exitUsage
}

func printUsage(w io.Writer) {
	var b strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&b, "  retrysafe %-7s %-12s  %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintf(w, usageText, b.String())
}

// run parses the command's flags, with flags and positional arguments in
// any order, and runs it; -h prints its help to e.stdout.
func (c *command) run(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	runner := c.flags(fs)
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			c.help(e.stdout, fs)
			return nil
		}
		if err != nil {
			return usageError("%v (see 'retrysafe help %s')", err, c.name)
		}
		if fs.NArg() == 0 {
			break
		}
		// The flag package stops at the first argument that is not a
		// flag; the flags after it count too.
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return runner(ctx, e, positional)
}

func (c *command) help(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: retrysafe %s [flags] %s\n\n%s\n", c.name, c.args, c.summary)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.about))
	}
	fmt.Fprintf(w, "\nflags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
