package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// countingStore counts the requests to its store.
type countingStore struct {
	persistence.Store
	n atomic.Int32
}

func (s *countingStore) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	s.n.Add(1)
	return s.Store.Put(ctx, rec, now)
}

func (s *countingStore) Get(ctx context.Context, key string) (*persistence.Record, error) {
	s.n.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *countingStore) Update(ctx context.Context, rec *persistence.Record) error {
	s.n.Add(1)
	return s.Store.Update(ctx, rec)
}

func (s *countingStore) Delete(ctx context.Context, key, token string) error {
	s.n.Add(1)
	return s.Store.Delete(ctx, key, token)
}

// The requests of a call with 0, 1 and 3 steps (idempotency.Step): a
// step costs a read and a write when it runs, and a read when a retry
// replays it. A replay of the completed call costs what it costs without
// steps: the reservation's conflict, and on a server that does not return
// the existing item with it (dynalite), a read.
func TestStepRequests(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, inner, _ := srv.setup(t)
		store := &countingStore{Store: inner}
		take := func() int { return int(store.n.Swap(0)) }
		conflictRead := 1
		if srv.ReturnsOldItem {
			conflictRead = 0
		}
		for _, steps := range []int{0, 1, 3} {
			fail := true
			h := func(ctx context.Context, in string) (int, error) {
				for i := range steps {
					if _, err := idempotency.Step(ctx, fmt.Sprint("s", i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return 0, err
					}
				}
				if in == "fails once" && fail {
					fail = false
					return 0, errors.New("fails after its steps")
				}
				return steps, nil
			}
			call := idempotency.Must(idempotency.Wrap(h, store, idempotency.WithKeyPrefix(fmt.Sprint(t.Name(), steps))))
			_, err := call(t.Context(), "first")
			require.NoError(t, err)
			first := take()
			_, err = call(t.Context(), "first")
			require.NoError(t, err)
			replay := take()
			_, err = call(t.Context(), "fails once")
			require.Error(t, err)
			take()
			_, err = call(t.Context(), "fails once")
			require.NoError(t, err)
			resumed := take()
			assert.Equal(t, []int{2 + 2*steps, 1 + conflictRead, 2 + steps}, []int{first, replay, resumed}, "%d steps: first call, replay, retry that resumes", steps)
			t.Logf("%d steps: first call %d requests, replay %d, retry resuming after every step %d", steps, first, replay, resumed)
		}
	})
}
