package protocol

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/protocol.md's table and model/table.pml from the table")

const (
	docPath    = "../../docs/protocol.md"
	modelPath  = "../../model/table.pml"
	beginTable = "<!-- BEGIN TABLE: generated from internal/protocol; go test ./internal/protocol -update -->\n"
	endTable   = "<!-- END TABLE -->\n"
)

// TestDocsAreGenerated: docs/protocol.md shows the table, and the model
// checks it, as the table is here.
func TestDocsAreGenerated(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	begin := strings.Index(string(doc), beginTable)
	end := strings.Index(string(doc), endTable)
	if begin < 0 || end < begin {
		t.Fatalf("%s: no generated table between %q and %q", docPath, beginTable, endTable)
	}
	wantDoc := string(doc[:begin]) + beginTable + Markdown() + endTable + string(doc[end+len(endTable):])
	check(t, docPath, string(doc), wantDoc)

	model, err := os.ReadFile(modelPath)
	if err != nil && !*update {
		t.Fatal(err)
	}
	check(t, modelPath, string(model), Promela())
}

func check(t *testing.T, path, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is not what internal/protocol generates: run go test ./internal/protocol -update", path)
}

// TestEveryCell: the table has one row per write and state, in order.
func TestEveryCell(t *testing.T) {
	if len(Table) != len(Writes)*len(States) {
		t.Fatalf("%d rows, want %d", len(Table), len(Writes)*len(States))
	}
	for _, w := range Writes {
		for _, s := range States {
			r := Table[int(w)*len(States)+int(s)]
			if r.Write != w || r.State != s || r.Outcome == 0 || r.Why == "" {
				t.Errorf("row for %s in %s: %+v", w, s, r)
			}
		}
	}
}

// TestRules are the protocol's properties, stated apart from its rules.
func TestRules(t *testing.T) {
	for _, r := range Table {
		w, s, o := r.Write, r.State, r.Outcome
		// Only a reservation applies to a record that is not the
		// sender's own.
		if o == Applies && w.Fenced() && !s.Own() {
			t.Errorf("%s applies to %s, which is not the sender's record", w, s)
		}
		// No fenced write applies to a completed record: a completed
		// record changes only by expiry or the operator.
		if o == Applies && w.Fenced() && s.Completed() {
			t.Errorf("%s applies to a completed record (%s)", w, s)
		}
		// A reservation never applies over a live record.
		if w == Reserve && s.Live() && o == Applies {
			t.Errorf("reserve applies over the live record %s", s)
		}
		// Nor is it refused where nothing is live.
		if w == Reserve && !s.Live() && o != Applies {
			t.Errorf("reserve does not apply over %s, which is not live", s)
		}
		// An expired record may be deleted by the store at any moment: a
		// write must change nothing there, or apply there as on absent.
		if s.Expired() {
			onAbsent := Lookup(w, Absent)
			if (o == Applies) != (onAbsent == Applies) {
				t.Errorf("%s: %s on %s but %s on absent", w, o, s, onAbsent)
			}
		}
	}
}
