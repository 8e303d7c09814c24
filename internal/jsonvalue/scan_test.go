package jsonvalue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// skipValues are values for skip: well-formed ones of every kind and
// spelling, and malformed ones.
var skipValues = []string{
	`0`, `-0`, `12`, `-1.5e+10`, `1E-3`, `0.25`, `1e5`, `true`, `false`, `null`, `truex`,
	`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\uD83D\uDE00\uABCD"`, `"é🚀"`, "\"\xff\xfe\"", "\"caf\xc3\"", "\"\xc3\"",
	`[]`, `{}`, `[ ]`, `{ }`, " [ 1 ,\t\"a\" ,\r\n{ \"k\" : [ null ] } ] ", `{"a":{"b":[1,{"c":"x"}]},"a":2}`,
	`[[],{},[{}],{"":[]}]`, `{"\u0061":1,"é":2,"` + "\xff" + `":3}`,
	``, ` `, `-`, `--1`, `01`, `1.`, `.5`, `1e`, `1e+`, `+1`, `-a`, `tru`, `nul`, `fals`, `nulL`, `x`,
	`"abc`, `"\`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", "\"a\x1f\"", "\"\t\"",
	`[`, `]`, `[1,]`, `[1 2]`, `[,1]`, `[1,,2]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{a:1}`, `{"a" 1}`, `{,}`,
	`{"a":1]`, `[1}`, `{"a":[1}`, `{"a\x":1}`, "{\"a\x01\":1}", `[1e]`, `[-]`, `{"a":tru}`,
}

// nest returns a value nested n deep: arrays, and objects every third
// level.
func nest(n int) string {
	var open, close strings.Builder
	for i := range n {
		if i%3 == 2 {
			open.WriteString(`{"k":`)
			close.WriteString(`}`)
		} else {
			open.WriteString(`[`)
			close.WriteString(`]`)
		}
	}
	c := []byte(close.String())
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return open.String() + "1" + string(c)
}

// nesting returns how deeply the well-formed value data nests.
func nesting(data []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// checkSkip checks skip on data, inside depth containers, against
// skipChecked, the step-by-step walk: the same end, or the same error. It
// also checks that skipValue refuses no well-formed value it tracks.
func checkSkip(t testing.TB, data []byte, depth int) {
	t.Helper()
	fast := decoder{data: data, depth: depth}
	fast.skipSpace()
	start := fast.pos
	slow := fast
	err := fast.skip()
	wantErr := slow.skipChecked()
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || fast.pos != slow.pos {
		t.Fatalf("skip of %q at depth %d: error %v at %d, want %v at %d", data, depth, err, fast.pos, wantErr, slow.pos)
	}
	if err == nil && fast.depth != depth {
		t.Fatalf("skip of %q at depth %d leaves depth %d", data, depth, fast.depth)
	}
	end, ok := skipValue(data, start, depth)
	switch {
	case ok && (wantErr != nil || end != slow.pos):
		t.Fatalf("skipValue of %q at depth %d accepts it up to %d; skipChecked: %v at %d", data, depth, end, wantErr, slow.pos)
	case !ok && wantErr == nil && nesting(data[start:slow.pos]) <= skipTracked:
		t.Fatalf("skipValue of %q at depth %d refuses a well-formed value", data, depth)
	}
}

func TestSkipMatchesSkipChecked(t *testing.T) {
	for _, v := range skipValues {
		for _, doc := range []string{v, " " + v + " ", "[" + v + "]", `{"k":` + v + `,"z":1}`, `[` + v + `,` + v + `]`} {
			for _, depth := range []int{0, 3, MaxDepth - 2} {
				checkSkip(t, []byte(doc), depth)
			}
		}
	}
	for _, doc := range eventFiles(t) {
		checkSkip(t, doc, 0)
	}
}

func TestSkipNesting(t *testing.T) {
	for _, tc := range []struct{ depth, n int }{
		{0, skipTracked - 1}, {0, skipTracked}, {0, skipTracked + 1}, {0, MaxDepth}, {0, MaxDepth + 1},
		{MaxDepth - 10, 10}, {MaxDepth - 10, 11}, {MaxDepth - 1, 1}, {MaxDepth, 1}, {MaxDepth, 0},
	} {
		data := []byte(nest(tc.n))
		checkSkip(t, data, tc.depth)
		d := decoder{data: data, depth: tc.depth}
		err := d.skip()
		assert.Equal(t, tc.depth+tc.n <= MaxDepth, err == nil, "%d deep at depth %d: %v", tc.n, tc.depth, err)
		_, ok := skipValue(data, 0, tc.depth)
		assert.Equal(t, tc.depth+tc.n <= MaxDepth && tc.n <= skipTracked, ok, "skipValue of %d deep at depth %d", tc.n, tc.depth)
	}
}

// TestDepthLimitWhenSkipping skips values inside deeply nested documents,
// so that what skip nests adds to what the decoder has entered.
func TestDepthLimitWhenSkipping(t *testing.T) {
	for _, outer := range []int{1, skipTracked, MaxDepth - 3} {
		for _, inner := range []int{1, 2, 3, skipTracked} {
			doc := strings.Repeat("[", outer-1) + `{"x":` + nest(inner) + `,"y":1}` + strings.Repeat("]", outer-1)
			valid := json.Valid([]byte(doc))
			require.Equal(t, outer+inner <= MaxDepth, valid, "%d in %d", inner, outer)
			_, err := Decode([]byte(doc), NewSelection())
			assert.Equal(t, valid, err == nil, "Decode of %d in %d: %v", inner, outer, err)
			assert.Equal(t, valid, Valid([]byte(doc)), "Valid of %d in %d", inner, outer)
			if outer == 1 {
				for _, p := range []string{"x", "y", "z", "x.0"} {
					_, err := LookupJSON([]byte(doc), parsePath(p))
					assert.Equal(t, valid, err == nil, "lookup of %s in %d in %d: %v", p, inner, outer, err)
				}
			}
		}
	}
}

func TestLookupKeys(t *testing.T) {
	long := strings.Repeat("a", 100)
	for _, tc := range []struct{ doc, path string }{
		{`{"é":1}`, "é"},
		{`{"\u00e9":2}`, "é"},
		{"{\"\xff\":3}", "\uFFFD"},
		{"{\"\xff\":3}", "\xff"},
		{`{"a\\b":4}`, `a\b`},
		{`{"a\\b":4}`, `a\\b`},
		{`{"` + strings.Repeat(`\u0061`, 100) + `":5}`, long},
		{`{"` + long + `":6}`, long},
		{`{"ab":1,"a\u0062":2}`, "ab"},
		{`{"a\u0062":1,"ab":{"c":2}}`, "ab.c"},
		{`{"x":{"é":1},"é":2}`, "é"},
		{`{"x":{"é":1},"é":2}`, "x.é"},
		{`{"x":[{"y":1}],"y":2}`, "y"},
		{`{"":7}`, ""},
		{`{"":7}`, "x"},
		{`{"a":"\"quoted\""}`, "a"},
		{`{"a":"caf` + "\xff" + `"}`, "a"},
	} {
		path := []Step{Member(tc.path)}
		if strings.Contains(tc.path, ".") {
			path = parsePath(tc.path)
		}
		full, err := Decode([]byte(tc.doc), nil)
		require.NoError(t, err, tc.doc)
		want := Walk(full, path)
		got, err := LookupJSON([]byte(tc.doc), path)
		require.NoError(t, err, tc.doc)
		assert.Equal(t, want, got, "%s in %s", tc.path, tc.doc)
		wantCanonical, err := AppendCanonical(nil, want)
		require.NoError(t, err)
		gotCanonical, err := AppendCanonicalAt(nil, tc.doc, path)
		require.NoError(t, err, tc.doc)
		assert.Equal(t, string(wantCanonical), string(gotCanonical), "%s in %s", tc.path, tc.doc)

		var std map[string]any
		require.NoError(t, json.Unmarshal([]byte(tc.doc), &std))
		if len(path) == 1 {
			assert.Equal(t, std[tc.path], got, "encoding/json disagrees on %s in %s", tc.path, tc.doc)
		}
	}
}

// checkLookupObject checks lookupObject on an object against
// lookupObjectChecked, the member-by-member walk.
func checkLookupObject(t testing.TB, doc []byte, path []Step) {
	t.Helper()
	fast := decoder{data: doc}
	fast.skipSpace()
	if len(path) == 0 || path[0].IsIndex || fast.pos >= len(doc) || doc[fast.pos] != '{' {
		return
	}
	slow := fast
	got, err := fast.lookupObject(path)
	want, wantErr := slow.lookupObjectChecked(path)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("lookupObject of %v in %q: error %v, want %v", path, doc, err, wantErr)
	}
	if err == nil && (fast.pos != slow.pos || fast.depth != slow.depth) {
		t.Fatalf("lookupObject of %v in %q ends at %d (depth %d), want %d (depth %d)", path, doc, fast.pos, fast.depth, slow.pos, slow.depth)
	}
	g, _ := AppendCanonical(nil, got)
	w, _ := AppendCanonical(nil, want)
	if string(g) != string(w) {
		t.Fatalf("lookupObject of %v in %q = %s, want %s", path, doc, g, w)
	}
}

func TestLookupObjectMatchesChecked(t *testing.T) {
	docs := eventFiles(t)
	for _, v := range skipValues {
		docs[v] = []byte(`{"a":` + v + `,"b":{"a":` + v + `}}`)
	}
	for name, doc := range docs {
		for _, p := range append(paths, "a", "b.a", "a.a") {
			t.Run(name+"/"+p, func(t *testing.T) { checkLookupObject(t, doc, parsePath(p)) })
		}
	}
}

func FuzzSkip(f *testing.F) {
	for _, v := range skipValues {
		f.Add([]byte(v), uint16(0))
	}
	f.Add([]byte(nest(300)), uint16(0))
	f.Add([]byte(nest(5)), uint16(MaxDepth-4))
	for _, doc := range eventFiles(f) {
		f.Add(doc, uint16(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint16) {
		if int(depth) > MaxDepth {
			// Near the limit, where it matters.
			depth = MaxDepth - depth%16
		}
		checkSkip(t, data, int(depth))
		if Valid(data) != json.Valid(data) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, Valid(data), json.Valid(data))
		}
	})
}
