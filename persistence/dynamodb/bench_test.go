package dynamodb_test

import (
	"slices"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// BenchmarkDynalite measures the store's request paths against dynalite on
// this machine, next to a plain GetItem on the same server (the floor: one
// round trip and nothing else). Besides ns/op it reports the median
// (p50-ns/op) and the 99th percentile (p99-ns/op) of the individual
// operations.
//
//	go test -run '^$' -bench Dynalite -benchtime 2000x ./persistence/dynamodb/
//
// FirstCall is a reservation and a completion (PutItem, UpdateItem), what a
// first invocation costs; Replay is a refused reservation and a read
// (PutItem, GetItem), what a retry costs against a server that ignores
// ALL_OLD, as dynalite does (against DynamoDB, and DynamoDB Local, a
// replay through the store is the PutItem alone: see
// BenchmarkWrapDynamoDBLocal).
func BenchmarkDynalite(b *testing.B) { benchmarkServer(b, server{dynamotest.Dynalite.Shared(b)}) }

// BenchmarkDynamoDBLocal is BenchmarkDynalite against DynamoDB Local, with
// the same requests.
func BenchmarkDynamoDBLocal(b *testing.B) {
	benchmarkServer(b, server{dynamotest.DynamoDBLocal.Shared(b)})
}

func benchmarkServer(b *testing.B, srv server) {
	name := srv.table(b)
	client := srv.NewClient()
	store := newStore(b, client, name)
	now := wholeSecond()
	response := []byte(`{"statusCode":201,"headers":{"Content-Type":"application/json"},"body":"{\"id\":\"p_1\",\"status\":\"created\"}"}`)

	done := completed(inProgress(now), response)
	benchGetItem(b, store, client, name, done, now)
	b.Run("FirstCall", func(b *testing.B) {
		var rec *persistence.Record
		measure(b, func() {
			if err := store.Put(b.Context(), rec, now); err != nil {
				b.Fatal(err)
			}
			if err := store.Update(b.Context(), completed(rec, response)); err != nil {
				b.Fatal(err)
			}
		}, func() { rec = inProgress(now) })
	})
	b.Run("Replay", func(b *testing.B) {
		retry := inProgress(now)
		retry.Key = done.Key
		measure(b, func() {
			if err := store.Put(b.Context(), retry, now); err == nil {
				b.Fatal("Put over a completed record succeeded")
			}
			if _, err := store.Get(b.Context(), done.Key); err != nil {
				b.Fatal(err)
			}
		}, nil)
	})
	b.Run("Put", func(b *testing.B) {
		var rec *persistence.Record
		measure(b, func() {
			if err := store.Put(b.Context(), rec, now); err != nil {
				b.Fatal(err)
			}
		}, func() { rec = inProgress(now) })
	})
	b.Run("Update", func(b *testing.B) {
		rec := inProgress(now)
		if err := store.Put(b.Context(), rec, now); err != nil {
			b.Fatal(err)
		}
		up := completed(rec, response)
		measure(b, func() {
			if err := store.Update(b.Context(), up); err != nil {
				b.Fatal(err)
			}
		}, nil)
	})
}

// benchGetItem puts rec with store, and runs the benchmark GetItem: a
// strongly consistent GetItem of rec with client, the floor of a request
// on its own.
func benchGetItem(b *testing.B, store *dynamodb.Store, client *awsdynamodb.Client, table string, rec *persistence.Record, now time.Time) {
	b.Helper()
	if err := store.Put(b.Context(), rec, now); err != nil {
		b.Fatal(err)
	}
	consistent := true
	in := &awsdynamodb.GetItemInput{TableName: &table, Key: idKey(rec.Key), ConsistentRead: &consistent}
	b.Run("GetItem", func(b *testing.B) {
		measure(b, func() {
			if _, err := client.GetItem(b.Context(), in); err != nil {
				b.Fatal(err)
			}
		}, nil)
	})
}

// measure runs op once per iteration, after prepare (untimed in the
// percentiles), and reports the median and 99th percentile of op's
// durations.
func measure(b *testing.B, op, prepare func()) {
	b.Helper()
	var durations []time.Duration
	for b.Loop() {
		if prepare != nil {
			prepare()
		}
		start := time.Now()
		op()
		durations = append(durations, time.Since(start))
	}
	if len(durations) == 0 {
		return
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2]), "p50-ns/op")
	b.ReportMetric(float64(durations[(len(durations)*99)/100]), "p99-ns/op")
}
