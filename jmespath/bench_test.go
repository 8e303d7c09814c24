package jmespath

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/internal/testing/testevents"
)

// benchEvent is the input of the idempotency benchmarks.
func benchEvent() events.APIGatewayProxyRequest { return testevents.APIGatewayOrder("ord_1") }

// benchExpressions are key expressions of increasing cost: a plain member,
// a nested member, and a member of a JSON string (Powertools' envelope).
var benchExpressions = []struct{ name, expr, want string }{
	{"member", "httpMethod", "POST"},
	{"nested", "requestContext.requestId", "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"},
	{"powertools_json", "powertools_json(body).order_id", "ord_1"},
}

func BenchmarkCompile(b *testing.B) {
	for _, e := range benchExpressions {
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(e.expr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExtract measures a key extraction from the 1 KB event: from the
// Go value a handler receives (SearchValue, what Wrap does), from its raw
// JSON (SearchJSON), and from an already decoded generic value (Search, the
// evaluation alone).
func BenchmarkExtract(b *testing.B) {
	ev := benchEvent()
	raw, err := json.Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		b.Fatal(err)
	}
	for _, e := range benchExpressions {
		expr := compile(b, e.expr)
		check := func(b *testing.B, got any, err error) {
			if err != nil {
				b.Fatal(err)
			}
			if got != e.want {
				b.Fatalf("%s = %v, want %s", e.expr, got, e.want)
			}
		}
		b.Run("SearchValue/"+e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := expr.SearchValue(ev)
				check(b, got, err)
			}
		})
		b.Run("SearchJSON/"+e.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				got, err := expr.SearchJSON(raw)
				check(b, got, err)
			}
		})
		b.Run("Search/"+e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := expr.Search(generic)
				check(b, got, err)
			}
		})
	}
}
