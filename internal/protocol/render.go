package protocol

import (
	"fmt"
	"strings"
)

// Markdown renders the table for docs/protocol.md: a matrix of outcomes,
// one row per write and one column per state, then each write's reasons.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| write \\ state |")
	for _, s := range States {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n|---|")
	for range States {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, w := range Writes {
		fmt.Fprintf(&b, "| **%s** |", w)
		for _, s := range States {
			o := Lookup(w, s)
			if o == Applies {
				fmt.Fprintf(&b, " **%s** |", o)
			} else {
				fmt.Fprintf(&b, " %s |", o)
			}
		}
		b.WriteString("\n")
	}
	for _, w := range Writes {
		fmt.Fprintf(&b, "\n**%s**\n\n", upperFirst(w.String()))
		// One line per distinct reason, with the states it covers.
		type reason struct {
			o      Outcome
			why    string
			states []string
		}
		var reasons []*reason
		for _, r := range Table {
			if r.Write != w {
				continue
			}
			var found *reason
			for _, x := range reasons {
				if x.o == r.Outcome && x.why == r.Why {
					found = x
				}
			}
			if found == nil {
				found = &reason{o: r.Outcome, why: r.Why}
				reasons = append(reasons, found)
			}
			found.states = append(found.states, r.State.String())
		}
		for _, x := range reasons {
			fmt.Fprintf(&b, "- %s: %s, %s.\n", strings.Join(x.states, ", "), x.o, x.why)
		}
	}
	return b.String()
}

// Promela renders the table as a Promela include for the model checker
// (model/table.pml): constants for the writes, states and outcomes, the
// array outcome[write*NSTATES+state], an inline that fills it (it names
// the array itself: SPIN does not pass arrays to inlines), and inlines that
// print the names, for the model's traces.
func Promela() string {
	var b strings.Builder
	b.WriteString("/* Generated from internal/protocol (go test ./internal/protocol -update); do not edit. */\n\n")
	for _, w := range Writes {
		fmt.Fprintf(&b, "#define W_%s %d\n", w.Ident(), int(w))
	}
	fmt.Fprintf(&b, "#define NWRITES %d\n\n", len(Writes))
	for _, s := range States {
		fmt.Fprintf(&b, "#define S_%s %d\n", s.Ident(), int(s))
	}
	fmt.Fprintf(&b, "#define NSTATES %d\n\n", len(States))
	for _, o := range []Outcome{Applies, Conflict, Refused, Done} {
		fmt.Fprintf(&b, "#define O_%s %d\n", o.Ident(), int(o))
	}
	b.WriteString("\n/*\n * outcome[w*NSTATES+s] is the outcome of write w in state s, once\n")
	b.WriteString(" * fill_table has run. A model that fills it before its search starts may\n")
	b.WriteString(" * define OUTCOME_HIDDEN to keep it out of the state vector.\n */\n")
	b.WriteString("#ifdef OUTCOME_HIDDEN\nhidden byte outcome[NWRITES*NSTATES];\n#else\nbyte outcome[NWRITES*NSTATES];\n#endif\n\n")
	b.WriteString("inline fill_table() {\n")
	for _, r := range Table {
		fmt.Fprintf(&b, "\toutcome[W_%s*NSTATES+S_%s] = O_%s;\n", r.Write.Ident(), r.State.Ident(), r.Outcome.Ident())
	}
	b.WriteString("}\n")
	// Names, for the model's traces.
	printName(&b, "write", "w", "W_", len(Writes), func(i int) (string, string) { return Writes[i].Ident(), Writes[i].String() })
	printName(&b, "state", "s", "S_", len(States), func(i int) (string, string) { return States[i].Ident(), States[i].String() })
	outcomes := []Outcome{Applies, Conflict, Refused, Done}
	printName(&b, "outcome", "o", "O_", len(outcomes), func(i int) (string, string) { return outcomes[i].Ident(), outcomes[i].String() })
	return b.String()
}

// printName writes an inline that prints the name of a write, state or
// outcome: print_write(w) prints "renew" for W_RENEW.
func printName(b *strings.Builder, kind, arg, prefix string, n int, name func(int) (ident, text string)) {
	fmt.Fprintf(b, "\ninline print_%s(%s) {\n\tif\n", kind, arg)
	for i := range n {
		ident, text := name(i)
		fmt.Fprintf(b, "\t:: %s == %s%s -> printf(\"%s\")\n", arg, prefix, ident, text)
	}
	b.WriteString("\tfi\n}\n")
}

func upperFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
