package idempotency_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/testevents"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// apiEvent is the benchmarks' input: an API Gateway REST request of about
// 1 KB whose body carries orderID.
var apiEvent = testevents.APIGatewayOrder

func respond(_ context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return events.APIGatewayProxyResponse{
		StatusCode: 201,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       `{"payment_id":"pay_123","status":"created"}`,
	}, nil
}

var benchVariants = []struct {
	name string
	opts []idempotency.WrapOption
}{
	{"whole_input", nil},
	{"jmespath_key", []idempotency.WrapOption{idempotency.WithKey("powertools_json(body).order_id")}},
}

func BenchmarkWrap(b *testing.B) {
	size, _ := json.Marshal(apiEvent("ord_1"))
	b.Logf("event size: %d bytes", len(size))
	for _, v := range benchVariants {
		b.Run("first_call/"+v.name, func(b *testing.B) {
			store := memory.New()
			h := idempotency.Must(idempotency.Wrap(respond, store, v.opts...))
			inputs := make([]events.APIGatewayProxyRequest, 4096)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%len(inputs) == 0 {
					b.StopTimer()
					for j := range inputs {
						inputs[j] = apiEvent("ord_" + strconv.Itoa(i+j))
					}
					store = memory.New()
					h = idempotency.Must(idempotency.Wrap(respond, store, v.opts...))
					b.StartTimer()
				}
				if _, err := h(b.Context(), inputs[i%len(inputs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("replay/"+v.name, func(b *testing.B) {
			h := idempotency.Must(idempotency.Wrap(respond, memory.New(), v.opts...))
			in := apiEvent("ord_1")
			if _, err := h(b.Context(), in); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h(b.Context(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A replay on the memory store allocates at most 40 times with the whole
// input as its key: those of a replay with a JMESPath key, and
// encoding/json's while it encodes the input (the map of headers, two for
// each member). With a JMESPath key it allocates at most 20 times. Most of
// those are encoding/json's: the value the key expression reaches in the
// body, and the replayed response, its header map and strings.
func TestReplayAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct {
		name string
		opts []idempotency.WrapOption
		max  float64
	}{
		{"whole input", nil, 40},
		{"JMESPath key", []idempotency.WrapOption{idempotency.WithKey("powertools_json(body).order_id")}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := idempotency.Must(idempotency.Wrap(respond, memory.New(), tc.opts...))
			in := apiEvent("ord_1")
			if _, err := h(t.Context(), in); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := h(t.Context(), in); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > tc.max {
				t.Errorf("a replay allocates %.1f times, want at most %.0f", allocs, tc.max)
			}
		})
	}
}
