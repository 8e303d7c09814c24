package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// output is the form of a command's output: an aligned table for people,
// or JSON for scripts.
type output struct{ json bool }

// outputFlag registers -o (and --output) on fs.
func outputFlag(fs *flag.FlagSet) *output {
	o := &output{}
	set := func(v string) error {
		switch v {
		case "table":
			o.json = false
		case "json":
			o.json = true
		default:
			return fmt.Errorf("want table or json, not %q", v)
		}
		return nil
	}
	fs.Func("o", "output `form`: table or json (default table)", set)
	fs.Func("output", "the same as -o (`form`)", set)
	return o
}

// writeJSON writes v as indented JSON, with a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes rows of cells, tab-separated, as aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table {
	return &table{tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }
