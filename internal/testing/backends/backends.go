// Package backends opens the stores that tests of adapters run on:
// memory, and real servers on 127.0.0.1 (redis-server, dynalite and
// DynamoDB Local). Tests skip a backend whose server cannot start, and
// fail instead with IDEMPOTENCY_REQUIRE_INTEGRATION=1.
package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// Main runs the tests of m, then stops the shared servers. Call it from
// TestMain.
func Main(m *testing.M) { dynalite.Main(stopLocal{m}) }

// stopLocal runs the tests, then stops the shared DynamoDB Local, before
// dynalite.Main stops dynalite.
type stopLocal struct{ m *testing.M }

func (s stopLocal) Run() int {
	code := s.m.Run()
	if srv, err := sharedLocal(); err == nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping DynamoDB Local:", err)
		}
	}
	return code
}

var sharedLocal = sync.OnceValues(func() (*dynamodblocal.Server, error) {
	return dynamodblocal.StartContext(context.Background())
})

// DynamoDBLocal returns the DynamoDB Local server shared by the tests of
// the binary, the backend with transactions; it skips the test when
// DynamoDB Local cannot start.
func DynamoDBLocal(t *testing.T) *dynamodblocal.Server {
	srv, err := sharedLocal()
	if errors.Is(err, dynamodblocal.ErrUnavailable) {
		testenv.SkipUnlessRequired(t, err)
	}
	require.NoError(t, err)
	return srv
}

// A Backend is a kind of store, and how to open stores of it.
type Backend struct {
	Name string
	// Open returns a function that opens stores on one new database of
	// the backend, as server processes would, each with its own client:
	// they share the records, and not the flights of calls in one
	// process. The memory store is one process's: its stores are one.
	Open func(t *testing.T) func() persistence.Store
}

// All are the backends.
var All = []Backend{
	{"memory", func(t *testing.T) func() persistence.Store {
		store := memory.New()
		return func() persistence.Store { return store }
	}},
	{"redis", func(t *testing.T) func() persistence.Store {
		srv := redisserver.Start(t)
		return func() persistence.Store {
			store, err := redisstore.New(srv.NewClient())
			require.NoError(t, err)
			return store
		}
	}},
	{"dynalite", func(t *testing.T) func() persistence.Store {
		srv := dynalite.Shared(t)
		return DynamoStores(t, srv.NewTable, srv.NewClient)
	}},
	{"dynamodb-local", func(t *testing.T) func() persistence.Store {
		srv := DynamoDBLocal(t)
		return DynamoStores(t, srv.NewTable, srv.NewClient)
	}},
}

// DynamoStores returns a function that opens stores on a new table of a
// DynamoDB server.
func DynamoStores(t *testing.T,
	newTable func(testenv.TB, func(context.Context, *awsdynamodb.Client, string) error) string,
	newClient func(...func(*awsdynamodb.Options)) *awsdynamodb.Client) func() persistence.Store {
	table := newTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
		return dynamodb.CreateTable(ctx, client, name)
	})
	return func() persistence.Store {
		store, err := dynamodb.New(newClient(), table)
		require.NoError(t, err)
		return store
	}
}

// ForEach runs test once per backend.
func ForEach(t *testing.T, test func(t *testing.T, open func() persistence.Store)) {
	for _, b := range All {
		t.Run(b.Name, func(t *testing.T) { test(t, b.Open(t)) })
	}
}

// EndsWithoutOutcome returns a store whose completions never arrive: the
// call that reserved a key ends as if its process died before it recorded
// its result (the completion fails as a timeout does), and its
// reservation lapses at the end of its lease.
func EndsWithoutOutcome(inner persistence.Store) persistence.Store {
	return losesCompletions{inner}
}

type losesCompletions struct{ persistence.Store }

func (s losesCompletions) Update(ctx context.Context, rec *persistence.Record) error {
	if rec.Status == persistence.StatusCompleted {
		return context.DeadlineExceeded
	}
	return s.Store.Update(ctx, rec)
}

// Release releases every key of store as an operator does (retrysafe
// release), and returns how many records it found, and how many of them
// were held.
func Release(ctx context.Context, store persistence.Store) (records, held int, err error) {
	admin, ok := store.(persistence.Admin)
	if !ok {
		return 0, 0, fmt.Errorf("%T is not a persistence.Admin", store)
	}
	err = admin.List(ctx, "", 0, func(page []*persistence.Record) error {
		for _, rec := range page {
			records++
			if rec.Held {
				held++
			}
			if err := admin.DeleteRecord(ctx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	return records, held, err
}
