package canonical

import (
	"bytes"
	"encoding/json"
	"testing"
)

// plainRun stops at the first byte that plain does not have, wherever it
// is in a block of 8 bytes and whatever the bytes around it.
func TestPlainRun(t *testing.T) {
	for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']', 0x7f} {
		for n := 1; n <= 24; n++ {
			for at := 0; at < n; at++ {
				for c := range 256 {
					doc := bytes.Repeat([]byte{fill}, n)
					doc[at] = byte(c)
					want := n
					if !plain[c] {
						want = at
					}
					if got := plainRun(doc, 0); got != want {
						t.Fatalf("plainRun(%q) = %d, want %d", doc, got, want)
					}
				}
			}
		}
	}
}

// checkAppendDoc checks that the writer writes what Parse and Append write
// for doc, a document that json.Valid accepts: white space included, as
// encoding/json's output has none.
func checkAppendDoc(t *testing.T, doc []byte) {
	t.Helper()
	v, err := Parse(doc)
	if err != nil {
		t.Fatalf("%q: %v", doc, err)
	}
	want, err := Append(nil, v)
	if err != nil {
		t.Fatalf("%q: %v", doc, err)
	}
	got, err := new(writer).appendDoc([]byte("prefix"), doc)
	if err != nil {
		t.Fatalf("%q: %v", doc, err)
	}
	if string(got) != "prefix"+string(want) {
		t.Fatalf("%q:\nwriter:        %s\nParse, Append: %s", doc, got[len("prefix"):], want)
	}
}

var spacedDocs = []string{
	" 1 ", "\t\"a\"\n", " [ 1 , 2 ] ", "{ }", "[ ]", " { \"b\" : 1 , \"a\" : [ 2 , { \"d\" : null , \"c\" : true } ] } ",
	"{\"b\"\n:\n1\r,\t\"a\" :2}", "[ -0 , 1.0 , 1e2 , \"\\u0041\" , \"\\/\" ]", "{ \"\\u0062\" : 1 , \"a\" : 2 , \"b\" : 3 }",
}

// The writer leaves white space out.
func TestAppendDocSpace(t *testing.T) {
	for _, doc := range spacedDocs {
		checkAppendDoc(t, []byte(doc))
	}
}

// The writer writes what Parse and Append write, for any document that
// json.Valid accepts.
func FuzzAppendDoc(f *testing.F) {
	for _, doc := range spacedDocs {
		f.Add([]byte(doc))
	}
	f.Add([]byte(`{"a":1,"a":2,"\u0061":3}`))
	f.Add([]byte("\"\xff\\ud800\\udc00\\ud800\""))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		checkAppendDoc(t, doc)
	})
}
