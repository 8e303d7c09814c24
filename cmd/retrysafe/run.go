package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
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

var commands = []*command{keyCommand, getCommand, lsCommand, statsCommand, releaseCommand, sweepCommand}

const usageText = `retrysafe finds, lists and releases the records of the idempotency library
github.com/retrysafe/retrysafe.

usage:
%s
The store is a DynamoDB table (--table, or IDEMPOTENCY_TABLE; the SDK's
configuration: --profile, --region, AWS_ENDPOINT_URL_DYNAMODB), Redis or
Valkey (--redis URL, --cluster), or a PostgreSQL table (--postgres URL,
--pg-table, --pg-schema). Each request to it has a timeout
(--request-timeout), and the command a deadline (--timeout). Tables fit
the terminal, or 120 columns (-o wide: whole; -o json: for scripts).
'retrysafe help COMMAND' lists a command's flags.

exit codes:
  0    success
  1    the store failed, did not answer in time, or does not hold what the
       flags describe
  2    usage: a bad flag, an event that is not JSON, a bad expression
  3    no record: none for the key, or the library keeps none for the event
  4    refused: nothing was released (the record changed, it is completed
       and --force was not given, or the answer was not yes)
  130  interrupted (Ctrl-C)
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
			if err != nil && errors.Is(context.Cause(ctx), errInterrupted) {
				// What failed failed because of the interrupt, which the
				// terminal shows: nothing to add.
				return exitInterrupted
			}
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
			msg := dashed(err.Error())
			if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok && flagHints[name] != "" {
				msg += ": " + flagHints[name]
			}
			return usageError("%s (see 'retrysafe help %s')", msg, c.name)
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
	fmt.Fprintf(w, "usage: retrysafe %s\n\n%s\n", strings.TrimSpace(c.name+" [flags] "+c.args), c.summary)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.about))
	}
	fmt.Fprintf(w, "\nflags:\n")
	printFlags(w, fs)
}

// flagHints say where a flag that a command lacks belongs.
var flagHints = map[string]string{
	"function":    "the function of key's default prefix; the function in the partition key value of records under a sort key is --pk-function",
	"pk-function": "the function in the partition key value of records under a sort key (get, ls, stats, release); key's default prefix takes --function",
}

// aliases are the flags that are another flag's second name.
var aliases = map[string]string{"output": "o"}

// printFlags writes the flags of fs as flag.PrintDefaults does, but with
// the two dashes of the docs before names longer than a letter (the flag
// package takes one dash or two alike), and each alias with its flag.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	names := map[string][]string{}
	for alias, name := range aliases {
		names[name] = append(names[name], alias)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := aliases[f.Name]; ok {
			return
		}
		var b strings.Builder
		b.WriteString("  " + flagName(f.Name))
		for _, alias := range names[f.Name] {
			b.WriteString(", " + flagName(alias))
		}
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			b.WriteString(" " + arg)
		}
		def := f.DefValue
		if g, ok := f.Value.(flag.Getter); ok {
			if d, ok := g.Get().(time.Duration); ok {
				def = duration(d)
			}
		}
		switch def {
		case "", "0", "0s", "false":
		default:
			usage += " (default " + def + ")"
		}
		b.WriteString("\n    \t" + strings.Join(wrapText(usage, 72), "\n    \t"))
		fmt.Fprintln(w, b.String())
	})
}

// flagName returns name as the docs write it: -o, --table.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagInMessage is a flag's name in the flag package's messages, which
// write it with one dash.
var flagInMessage = regexp.MustCompile(`(^|[ :])-([A-Za-z][A-Za-z0-9-]+)`)

// dashed returns a message of the flag package with the flags' names as
// the docs write them.
func dashed(msg string) string {
	return flagInMessage.ReplaceAllString(msg, "$1--$2")
}
