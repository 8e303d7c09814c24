package idempotency_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

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
	opts []idempotency.Option
}{
	{"whole_input", nil},
	{"jmespath_key", []idempotency.Option{idempotency.WithKey("powertools_json(body).order_id")}},
}

func BenchmarkWrap(b *testing.B) {
	size, _ := json.Marshal(apiEvent("ord_1"))
	b.Logf("event size: %d bytes", len(size))
	for _, v := range benchVariants {
		b.Run("first_call/"+v.name, func(b *testing.B) {
			store := memory.New()
			h := idempotency.MustWrap(respond, store, v.opts...)
			inputs := make([]events.APIGatewayProxyRequest, 4096)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%len(inputs) == 0 {
					b.StopTimer()
					for j := range inputs {
						inputs[j] = apiEvent("ord_" + strconv.Itoa(i+j))
					}
					store = memory.New()
					h = idempotency.MustWrap(respond, store, v.opts...)
					b.StartTimer()
				}
				if _, err := h(b.Context(), inputs[i%len(inputs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("replay/"+v.name, func(b *testing.B) {
			h := idempotency.MustWrap(respond, memory.New(), v.opts...)
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

func BenchmarkKey(b *testing.B) {
	g, err := idempotency.NewGuard(memory.New(), idempotency.WithKeyPrefix("payments.main.handler"))
	require.NoError(b, err)
	material := []byte(`"ord_1"`)
	b.ReportAllocs()
	for b.Loop() {
		_ = g.Key(material)
	}
}

func TestKeyDerivationAllocatesOnce(t *testing.T) {
	g, err := idempotency.NewGuard(memory.New(), idempotency.WithKeyPrefix("payments.main.handler"))
	require.NoError(t, err)
	material := []byte(`{"customer":"cus_1","order_id":"ord_1"}`)
	allocs := testing.AllocsPerRun(1000, func() { _ = g.Key(material) })
	if allocs > 1 {
		t.Errorf("Key allocates %.0f times per call, want at most 1", allocs)
	}
}

// TestReplayAllocations holds a replay with a JMESPath key on the memory
// store to 5 allocations: the key string, the store's copy of the
// completed record (read without a reservation), and the replayed
// response's header map (two) and its strings (one buffer). It allows one
// more, since under the race detector sync.Pool drops values at random.
func TestReplayAllocations(t *testing.T) {
	h := idempotency.MustWrap(respond, memory.New(), idempotency.WithKey("powertools_json(body).order_id"))
	in := apiEvent("ord_1")
	if _, err := h(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := h(t.Context(), in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 6 {
		t.Errorf("a replay allocates %.1f times, want 5", allocs)
	}
}
