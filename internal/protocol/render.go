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
// (model/table.pml): constants for the writes, states and outcomes, and
// an inline that fills the array outcome[write*NSTATES+state].
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
	b.WriteString("\n/* fill_table sets t[w*NSTATES+s] to the outcome of write w in state s. */\n")
	b.WriteString("inline fill_table(t) {\n")
	for _, r := range Table {
		fmt.Fprintf(&b, "\tt[W_%s*NSTATES+S_%s] = O_%s;\n", r.Write.Ident(), r.State.Ident(), r.Outcome.Ident())
	}
	b.WriteString("}\n")
	return b.String()
}

func upperFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
