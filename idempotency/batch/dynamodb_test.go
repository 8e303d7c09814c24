package batch_test

// Redelivery against dynalite, a DynamoDB-compatible server: the store
// Lambda functions use, with separate clients standing in for separate
// execution environments.

import (
	"context"
	"fmt"
	"sync"
	"testing"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// dynamoStores returns n stores over one fresh table on the shared server,
// each with a client of its own.
func dynamoStores(t *testing.T, n int) []*dynamodb.Store {
	t.Helper()
	srv := dynalite.Shared(t)
	name := srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
		return dynamodb.CreateTable(ctx, client, name)
	})
	stores := make([]*dynamodb.Store, n)
	for i := range stores {
		s, err := dynamodb.New(srv.NewClient(), name)
		require.NoError(t, err)
		stores[i] = s
	}
	return stores
}

// TestRedeliveryDynamoDB: the same batch delivered twice runs each
// record's side effect once in total, and only the failed records again.
func TestRedeliveryDynamoDB(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			store := dynamoStores(t, 1)[0]
			rc := &recorder{}
			deliver := h.build(t, rc, store, idempotency.WithKey(h.key))
			records := []spec{
				{n: 1, order: "o-1"},
				{n: 2, order: "o-2"},
				{n: 3, order: "fail-1"},
				{n: 4, raw: "not json"},
				{n: 5, order: "o-3"},
				{n: 6, order: "o-1"}, // a re-send within the batch
			}
			for delivery := 1; delivery <= 2; delivery++ {
				failed, err := deliver(t.Context(), records)
				require.NoError(t, err)
				assert.Equal(t, ids(h, 3, 4), failed, "delivery %d", delivery)
			}
			assert.Equal(t, []string{"o-1", "o-2", "fail-1", "o-3", "fail-1"}, orders(rc.takeRuns()))
		})
	}
}

// TestConcurrentRedeliveryDynamoDB: two execution environments receive the
// same batch at once (a visibility timeout that passed while the first
// still ran), and their failed records come again until none fail: every
// record's side effect ran exactly once.
func TestConcurrentRedeliveryDynamoDB(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			stores := dynamoStores(t, 2)
			rc := &recorder{}
			var records []spec
			for i := range 10 {
				records = append(records, spec{n: i, order: fmt.Sprintf("o-%d", i), group: fmt.Sprintf("g-%d", i%2)})
			}
			envs := make([]func(context.Context, []spec) ([]string, error), len(stores))
			for i, store := range stores {
				envs[i] = h.build(t, rc, store, idempotency.WithKey(h.key), batch.WithParallelism(2))
			}

			pending := make([][]spec, len(envs))
			var wg sync.WaitGroup
			for i, deliver := range envs {
				wg.Go(func() {
					failed, err := deliver(t.Context(), records)
					assert.NoError(t, err)
					pending[i] = pick(h, records, failed)
				})
			}
			wg.Wait()
			for round := 0; len(pending[0])+len(pending[1]) > 0; round++ {
				require.Less(t, round, 5, "failed records keep failing: %v", pending)
				for i, deliver := range envs {
					if len(pending[i]) == 0 {
						continue
					}
					failed, err := deliver(t.Context(), pending[i])
					require.NoError(t, err)
					pending[i] = pick(h, pending[i], failed)
				}
			}

			count := map[string]int{}
			for _, r := range rc.takeRuns() {
				count[r.order]++
			}
			assert.Len(t, count, len(records))
			for order, n := range count {
				assert.Equal(t, 1, n, "order %s ran %d times", order, n)
			}
		})
	}
}
