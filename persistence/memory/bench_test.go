package memory_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// BenchmarkStore measures the store's side of an invocation: a first call
// (Put of a new key, then Update), a replay (a Put that conflicts with a
// completed record), and the same replay answered by a Cache in front of
// the store.
func BenchmarkStore(b *testing.B) {
	now := time.Now().Truncate(time.Second)
	response := []byte(`{"statusCode":201,"headers":{"Content-Type":"application/json"},"body":"{\"payment_id\":\"pay_123\",\"status\":\"created\"}"}`)
	record := func(key string) *persistence.Record {
		return &persistence.Record{
			Key:                 key,
			Status:              persistence.StatusInProgress,
			ExpiresAt:           now.Add(time.Hour),
			InProgressExpiresAt: now.Add(30 * time.Second),
			Token:               "QGZWM5GVFV3PZ4LSYUBE4RK7WA",
		}
	}
	b.Run("FirstCall", func(b *testing.B) {
		var s *memory.Store
		ctx := b.Context()
		keys := make([]string, 4096)
		for i := range keys {
			keys[i] = "orders#" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%len(keys) == 0 {
				// A new store for every round of keys, so that every Put
				// reserves a new key, in a store of at most len(keys).
				s = memory.New()
			}
			rec := record(keys[i%len(keys)])
			if err := s.Put(ctx, rec, now); err != nil {
				b.Fatal(err)
			}
			rec.Status, rec.Response = persistence.StatusCompleted, response
			if err := s.Update(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name  string
		store func(persistence.Store) persistence.Store
	}{
		{"Replay", func(s persistence.Store) persistence.Store { return s }},
		{"Replay_cached", func(s persistence.Store) persistence.Store { return memory.NewCache(s, 1000) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := c.store(memory.New())
			ctx := b.Context()
			done := record("orders#done")
			if err := s.Put(ctx, done, now); err != nil {
				b.Fatal(err)
			}
			done.Status, done.Response = persistence.StatusCompleted, response
			if err := s.Update(ctx, done); err != nil {
				b.Fatal(err)
			}
			retry := record("orders#done")
			retry.Token = "5N2ZJ6ZQ7X4XKQXRZ3M6QK2N4E"
			b.ReportAllocs()
			for b.Loop() {
				conflict, ok := s.Put(ctx, retry, now).(*persistence.ConflictError)
				if !ok || conflict.Existing == nil {
					b.Fatal("Put over a completed record did not conflict")
				}
			}
		})
	}
}
