package jsonvalue

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/testing/testevents"
)

// BenchmarkAppendCanonicalAt finds the key in an order's body, as the key
// expression powertools_json(body).order_id does.
func BenchmarkAppendCanonicalAt(b *testing.B) {
	body := `{"order_id":"ord_1","customer":"cus_4QFOF3xSVW","amount":4200,"currency":"EUR","lines":[{"sku":"sku_1","qty":2},{"sku":"sku_2","qty":1}]}`
	path := []Step{Member("order_id")}
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := AppendCanonicalAt(dst[:0], body, path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookupString reads the body of an API Gateway event through a
// pointer, as the key expression powertools_json(body).order_id does: by
// reflection (LookupGoString) and through a compiled GoPath.
func BenchmarkLookupString(b *testing.B) {
	ev := testevents.APIGatewayOrder("ord_1")
	path := []Step{Member("body")}
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, _, err := LookupGoString(&ev, path); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("compiled", func(b *testing.B) {
		p := NewGoPath(path)
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, _, err := p.LookupString(&ev); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}
