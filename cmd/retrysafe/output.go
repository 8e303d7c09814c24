package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// output is the form of a command's output: an aligned table for people,
// fitted to a width or whole (wide), or JSON for scripts.
type output struct{ json, wide bool }

// outputFlag registers -o (and --output) on fs.
func outputFlag(fs *flag.FlagSet) *output {
	o := &output{}
	set := func(v string) error {
		switch v {
		case "table":
			o.json, o.wide = false, false
		case "wide":
			o.json, o.wide = false, true
		case "json":
			o.json, o.wide = true, false
		default:
			return fmt.Errorf("want table, wide or json, not %q", v)
		}
		return nil
	}
	fs.Func("o", "output `form`: table (fits the terminal, or 120 columns: long keys are shortened in the middle, "+
		"long text wrapped), wide (the same, whole) or json (default table)", set)
	fs.Func("output", "the same as -o (`form`)", set)
	return o
}

// note writes a note for people on stderr, wrapped to fit the terminal,
// or 120 columns.
func (e *env) note(format string, args ...any) {
	for _, line := range wrapText(fmt.Sprintf(format, args...), tableWidth(&output{}, e.stderrWidth)) {
		fmt.Fprintln(e.stderr, line)
	}
}

// writeJSON writes v as indented JSON, with a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// defaultWidth is the most columns a table takes when the output is not a
// terminal, whose own width counts otherwise: that of common terminal
// windows, which wrap longer lines, and then lose their alignment.
const defaultWidth = 120

// The fitting of tables: the space between columns, the narrowest a
// column of keys is shortened to, and the narrowest a last column is
// wrapped to.
const (
	columnGap    = 2
	minKeyWidth  = 32
	minWrapWidth = 24
)

// table writes rows of cells as aligned columns, in width columns at most
// when it can (0: no limit): a column of keys (keys) is shortened in the
// middle, then the text of the last column (wrap) is wrapped onto lines
// of its own. A row's last cell is not padded, as with text/tabwriter.
type table struct {
	w     io.Writer
	width int
	rows  [][]string
	keys  int  // the column of keys, or -1
	wrap  bool // the last column's text may wrap
	// shortened reports, after flush, whether keys were shortened.
	shortened bool
}

func newTable(w io.Writer, width int) *table {
	return &table{w: w, width: width, keys: -1}
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

// flush writes the table.
func (t *table) flush() error {
	cols := 0
	for _, r := range t.rows {
		cols = max(cols, len(r))
	}
	// widths are those of the cells followed by another: the last cell
	// of a row takes the room it needs.
	widths := make([]int, cols)
	for _, r := range t.rows {
		for i, c := range r[:len(r)-1] {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	indent := func(col int) int { // where column col starts
		n := 0
		for _, w := range widths[:col] {
			n += w + columnGap
		}
		return n
	}
	lineWidth := func() int {
		n := 0
		for _, r := range t.rows {
			n = max(n, indent(len(r)-1)+utf8.RuneCountInString(r[len(r)-1]))
		}
		return n
	}
	if t.width > 0 && t.keys >= 0 && t.keys < cols-1 {
		if excess := lineWidth() - t.width; excess > 0 && widths[t.keys] > minKeyWidth {
			widths[t.keys] = max(minKeyWidth, widths[t.keys]-excess)
		}
	}
	wrapAt := 0
	if t.width > 0 && t.wrap && lineWidth() > t.width && t.width-indent(cols-1) >= minWrapWidth {
		wrapAt = t.width - indent(cols-1)
	}
	var b strings.Builder
	for _, r := range t.rows {
		b.Reset()
		for i, c := range r {
			if i == len(r)-1 {
				lines := []string{c}
				if wrapAt > 0 && i == cols-1 {
					lines = wrapText(c, wrapAt)
				}
				b.WriteString(lines[0])
				for _, l := range lines[1:] {
					b.WriteString("\n" + strings.Repeat(" ", indent(i)) + l)
				}
				break
			}
			if i == t.keys {
				if s := shortenKey(c, widths[i]); s != c {
					c, t.shortened = s, true
				}
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+columnGap))
		}
		b.WriteString("\n")
		if _, err := io.WriteString(t.w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// shortenKey returns key in width columns at most, with the middle of its
// hash left out: the prefix says whose a key is, and the ends of the hash
// tell keys apart. A prefix too long for that is shortened too.
func shortenKey(key string, width int) string {
	if utf8.RuneCountInString(key) <= width {
		return key
	}
	if i := strings.LastIndexByte(key, '#'); i >= 0 {
		if room := width - utf8.RuneCountInString(key[:i+1]); room >= 9 {
			return key[:i+1] + middle(key[i+1:], room)
		}
	}
	return middle(key, width)
}

// middle returns s in width runes, its middle replaced by an ellipsis.
func middle(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	head := width / 2
	tail := width - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// wrapText breaks s into lines of width runes at most, between words; a
// word longer than a line has one of its own.
func wrapText(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}
