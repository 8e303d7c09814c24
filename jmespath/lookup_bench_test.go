package jmespath

import (
	"encoding/json"
	"testing"

	"github.com/retrysafe/retrysafe/internal/testing/testevents"
)

// BenchmarkBodyMember measures what the usual key expression,
// powertools_json(body).order_id, does with the body of the 1 KB API
// Gateway event: the lookup in the valid JSON text (json.Valid, member,
// decodeValue), against decoding the whole body with encoding/json and
// taking the member (what the lookup replaces).
func BenchmarkBodyMember(b *testing.B) {
	body := []byte(testevents.APIGatewayOrder("ord_1").Body)
	s := memberStep("order_id")
	b.Logf("body: %d bytes", len(body))
	b.Run("lookup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
			v, err := decodeValue(member(body, s))
			if err != nil || v != "ord_1" {
				b.Fatal(v, err)
			}
		}
	})
	b.Run("decode_whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := parseJSON(body)
			if err != nil || v.(map[string]any)["order_id"] != "ord_1" {
				b.Fatal(v, err)
			}
		}
	})
}
