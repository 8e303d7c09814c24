package idempotency

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/persistence/memory"
)

// The flight registry holds an entry only while its leader's call runs:
// after calls of every outcome, concurrent or not, it is empty.
func TestFlightsDoNotGrow(t *testing.T) {
	store := memory.NewCache(memory.New(), 16)
	g, err := NewGuard(store, WithKeyPrefix("flights"), WithWait(5e9))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	outcomes := []func() ([]byte, error){
		func() ([]byte, error) { return []byte(`1`), nil },
		func() ([]byte, error) { return nil, boom },
		func() ([]byte, error) { return nil, Permanent(boom) },
		func() ([]byte, error) { panic("boom") },
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			defer func() { _ = recover() }()
			key := string(rune('a' + i%7))
			_, _ = g.Do(context.Background(), key, "", func(context.Context) ([]byte, error) { return outcomes[i%len(outcomes)]() })
		})
	}
	wg.Wait()
	g.flights.mu.Lock()
	defer g.flights.mu.Unlock()
	if n := len(g.flights.m); n != 0 {
		t.Fatalf("%d flights left after every call ended", n)
	}
}
