package linearize

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func TestMain(m *testing.M) { backends.Main(m) }

// long reports whether the long runs are asked for (make chaos).
var long = os.Getenv("LINEARIZE_LONG") == "1"

// checkTimeout bounds the check of one key. Each key's history is a few
// dozen calls, which Porcupine decides in milliseconds.
const checkTimeout = time.Minute

// dir is where visualizations go.
func dir(t *testing.T) string {
	if d := os.Getenv("LINEARIZE_DIR"); d != "" {
		return d
	}
	return t.TempDir()
}

// TestStoresAreLinearizable: on every store, the histories of many
// clients per key, with faults, are linearizable.
func TestStoresAreLinearizable(t *testing.T) {
	backends.ForEach(t, func(t *testing.T, open func() persistence.Store) {
		w := Workload{Prefix: "linearize." + t.Name(), Keys: 100, Clients: 3, Calls: 3, Workers: 4, Seed: uint64(time.Now().UnixNano()), Faults: true}
		if long {
			w.Keys, w.Calls, w.Workers = 2000, 4, 8
		}
		t.Logf("seed %d", w.Seed)
		h, stats := w.Run(t.Context(), open)
		res, err := Check(h, checkTimeout, dir(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d calls on %d keys checked in %v (%d with an unknown outcome); faults %v", res.Calls, res.Keys, res.Took, res.Unknown, stats.Faults)
	})
}

// TestBrokenStoresAreCaught: a store with a known bug fails the check.
func TestBrokenStoresAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(s *memory.Store) persistence.Store
	}{
		{"completion fenced on token only", func(s *memory.Store) persistence.Store { return tokenOnly{s} }},
		{"renewal that shortens the lease", func(s *memory.Store) persistence.Store { return shortening{s} }},
		{"release that deletes another's record", func(s *memory.Store) persistence.Store { return releasesAny{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := tc.wrap(memory.New())
			w := Workload{Prefix: "broken", Keys: 10, Clients: 2, Calls: 2, Workers: 2, Seed: 1}
			h, _ := w.Run(t.Context(), func() persistence.Store { return store })
			_, err := Check(h, checkTimeout, dir(t))
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("Check: %v, want a violation", err)
			}
			t.Log(v)
		})
	}
}

// tokenOnly fences completions and renewals on the token alone: a
// renewal that arrives after the completion reopens the record.
type tokenOnly struct{ *memory.Store }

func (s tokenOnly) Update(ctx context.Context, rec *persistence.Record) error {
	old, err := s.Get(ctx, rec.Key)
	if err == nil && old.Token == rec.Token && old.Status == persistence.StatusCompleted && rec.Status == persistence.StatusInProgress {
		if err := s.DeleteRecord(ctx, old); err != nil {
			return err
		}
		return s.Put(ctx, rec, time.Time{})
	}
	return s.Store.Update(ctx, rec)
}

// shortening applies a renewal older than the one applied.
type shortening struct{ *memory.Store }

func (s shortening) Update(ctx context.Context, rec *persistence.Record) error {
	old, err := s.Get(ctx, rec.Key)
	if err == nil && old.Token == rec.Token && old.Status == persistence.StatusInProgress && rec.Status == persistence.StatusInProgress &&
		old.InProgressExpiresAt.After(rec.InProgressExpiresAt) {
		if err := s.DeleteRecord(ctx, old); err != nil {
			return err
		}
		return s.Put(ctx, rec, time.Time{})
	}
	return s.Store.Update(ctx, rec)
}

// releasesAny releases any reservation, whatever its token.
type releasesAny struct{ *memory.Store }

func (s releasesAny) Delete(ctx context.Context, key, token string) error {
	if old, err := s.Get(ctx, key); err == nil && old.Status == persistence.StatusInProgress {
		token = old.Token
	}
	return s.Store.Delete(ctx, key, token)
}
