package dynamodb_test

import (
	"context"
	"errors"
	"net/http"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/cpubench"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
)

// BenchmarkFloorDynalite measures a wrapped handler's first call and replay
// next to the bare SDK requests they need, made directly through the same
// SDK client against the same dynalite server: the SDK's floor. Besides
// ns/op (wall) it reports the CPU time of this process per operation
// (cpu-ns/op: the client's, the server runs in a process of its own), the
// request body bytes sent per operation (req-B/op), and the goroutines
// started per operation (goroutines/op, where the runtime counts them;
// the count is the whole process's, so run the benchmark alone).
// The ratio of Lib* to SDK* is the library's cost over the floor;
// FirstCallRatio and ReplayRatio report it (cpu-ratio) from the two run
// alternately:
//
//	go test -run '^$' -bench Floor -cpu 1 -count 6 ./persistence/dynamodb/ | benchstat -
//
// SDKFirstCall is a PutItem of the same item as the library's reservation
// (without payload validation) conditioned on attribute_not_exists(id),
// and an UpdateItem of the status, the expiry and the same response,
// conditioned on the owner token and the in-progress status; SDKReplay is a PutItem that fails its
// condition on the library's completed record, asking for ALL_OLD, and on
// a server that ignores ALL_OLD (dynalite) a GetItem, as the library's
// replay there.
func BenchmarkFloorDynalite(b *testing.B) {
	benchmarkFloor(b, server{dynamotest.Dynalite.Shared(b)})
}

// BenchmarkFloorDynamoDBLocal is BenchmarkFloorDynalite against DynamoDB
// Local, where a replay is the failed PutItem alone (ALL_OLD).
func BenchmarkFloorDynamoDBLocal(b *testing.B) {
	benchmarkFloor(b, server{dynamotest.DynamoDBLocal.Shared(b)})
}

// bodyCounter is an HTTP client that counts the request body bytes it
// sends.
type bodyCounter struct {
	next  awshttp.BuildableClient
	bytes atomic.Int64
}

func (c *bodyCounter) Do(req *http.Request) (*http.Response, error) {
	if req.ContentLength > 0 {
		c.bytes.Add(req.ContentLength)
	}
	return c.next.Do(req)
}

func benchmarkFloor(b *testing.B, srv server) {
	name := srv.table(b)
	counter := &bodyCounter{next: *awshttp.NewBuildableClient()}
	client := srv.NewClient(func(o *awsdynamodb.Options) { o.HTTPClient = counter })
	store := newStore(b, client, name)
	h := &paytest.Handler{}
	var doneKey string // the record of done, which the replays find
	pay := paytest.Wrap(b, func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
		if doneKey == "" {
			doneKey, _ = idempotency.KeyFromContext(ctx)
		}
		return h.Charge(ctx, p)
	}, store)
	done := paytest.New()
	first, err := pay(b.Context(), done)
	if err != nil {
		b.Fatal(err)
	}
	// The response the library stores, as the core encodes it.
	response := `{"charge_id":"` + first.ChargeID + `","amount":4200}`

	put, update := bareRequests(name, response)
	consistent := true

	var (
		key, token string
		p          paytest.Payment
	)
	newKey := func() { p = paytest.New(); key, token = "payments#"+p.OrderID, p.OrderID[4:] }
	sdkFirstCall := func() {
		now := time.Now()
		if _, err := client.PutItem(b.Context(), put(key, token, now)); err != nil {
			b.Fatal(err)
		}
		if _, err := client.UpdateItem(b.Context(), update(key, token, now)); err != nil {
			b.Fatal(err)
		}
	}
	libFirstCall := func() {
		if _, err := pay(b.Context(), p); err != nil {
			b.Fatal(err)
		}
	}
	sdkReplay := func() {
		_, err := client.PutItem(b.Context(), put(doneKey, "t2", time.Now()))
		var failed *types.ConditionalCheckFailedException
		if !errors.As(err, &failed) {
			b.Fatalf("PutItem over an existing item: %v", err)
		}
		if len(failed.Item) == 0 {
			if _, err := client.GetItem(b.Context(), &awsdynamodb.GetItemInput{TableName: &name, Key: idKey(doneKey), ConsistentRead: &consistent}); err != nil {
				b.Fatal(err)
			}
		}
	}
	libReplay := func() {
		if _, err := pay(b.Context(), done); err != nil {
			b.Fatal(err)
		}
	}
	// Warm the table, the connections and the server's code paths, so
	// that the first sub-benchmark is not the one that pays for them.
	for range 100 {
		newKey()
		sdkFirstCall()
		newKey()
		libFirstCall()
		sdkReplay()
		libReplay()
	}

	b.Run("SDKFirstCall", func(b *testing.B) { floor(b, counter, sdkFirstCall, newKey) })
	b.Run("LibFirstCall", func(b *testing.B) { floor(b, counter, libFirstCall, newKey) })
	b.Run("SDKReplay", func(b *testing.B) { floor(b, counter, sdkReplay, nil) })
	b.Run("LibReplay", func(b *testing.B) { floor(b, counter, libReplay, nil) })
	// The ratios, from the two alternating in one loop, so that a change
	// in the machine's load during the run weighs on both alike.
	b.Run("FirstCallRatio", func(b *testing.B) { ratio(b, sdkFirstCall, libFirstCall, newKey) })
	b.Run("ReplayRatio", func(b *testing.B) { ratio(b, sdkReplay, libReplay, nil) })
}

// ratio runs sdk and lib alternately, each after prepare, and reports
// the CPU time of each per operation and lib's over sdk's (cpu-ratio).
func ratio(b *testing.B, sdk, lib, prepare func()) {
	b.Helper()
	var sdkCPU, libCPU time.Duration
	n := 0
	// Profiler labels tell the two apart in a profile (-cpuprofile): go
	// tool pprof -tagfocus side=lib.
	ctx := context.Background()
	labels := [2]context.Context{pprof.WithLabels(ctx, pprof.Labels("side", "sdk")), pprof.WithLabels(ctx, pprof.Labels("side", "lib"))}
	defer pprof.SetGoroutineLabels(ctx)
	for b.Loop() {
		for i, op := range [2]func(){sdk, lib} {
			if prepare != nil {
				prepare()
			}
			pprof.SetGoroutineLabels(labels[i])
			start := cpubench.ProcessCPU()
			op()
			if d := cpubench.ProcessCPU() - start; i == 0 {
				sdkCPU += d
			} else {
				libCPU += d
			}
		}
		n++
	}
	if n == 0 || sdkCPU == 0 {
		return
	}
	b.ReportMetric(float64(sdkCPU.Nanoseconds())/float64(n), "sdk-cpu-ns/op")
	b.ReportMetric(float64(libCPU.Nanoseconds())/float64(n), "lib-cpu-ns/op")
	b.ReportMetric(float64(libCPU)/float64(sdkCPU), "cpu-ratio")
}

// floor runs op once per iteration, after prepare (outside the CPU time),
// and reports the process's CPU time, the request body bytes and the
// goroutines started per operation.
func floor(b *testing.B, counter *bodyCounter, op, prepare func()) {
	b.Helper()
	b.ReportAllocs()
	counter.bytes.Store(0)
	goroutines := goroutinesStarted()
	cpu, n := cpubench.Loop(b, op, prepare)
	if n == 0 {
		return
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
	b.ReportMetric(float64(counter.bytes.Load())/float64(n), "req-B/op")
	if g := goroutinesStarted(); g >= 0 && goroutines >= 0 {
		b.ReportMetric(float64(g-goroutines)/float64(n), "goroutines/op")
	}
}

// goroutinesStarted returns how many goroutines the program has started,
// or -1 where the runtime does not count them (before Go 1.26).
func goroutinesStarted() int64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int64(s[0].Value.Uint64())
}

// bareRequests returns the bare SDK requests of a first call, made
// directly: put, a PutItem of the same item as the library's reservation
// (without payload validation) conditioned on attribute_not_exists(id),
// which on an existing key is also the replay's failed PutItem, asking for
// ALL_OLD; and update, an UpdateItem of the status, the expiry and
// response, conditioned on the owner token and the in-progress status
// (docs/protocol.md: the least a completion needs).
func bareRequests(table, response string) (
	put func(key, token string, now time.Time) *awsdynamodb.PutItemInput,
	update func(key, token string, now time.Time) *awsdynamodb.UpdateItemInput,
) {
	put = func(key, token string, now time.Time) *awsdynamodb.PutItemInput {
		return &awsdynamodb.PutItemInput{
			TableName: &table,
			Item: map[string]types.AttributeValue{
				"id":                     &types.AttributeValueMemberS{Value: key},
				"expiration":             &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
				"in_progress_expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10)},
				"status":                 &types.AttributeValueMemberS{Value: "INPROGRESS"},
				"owner_token":            &types.AttributeValueMemberS{Value: token},
			},
			ConditionExpression:                 aws.String("attribute_not_exists(id)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
	}
	update = func(key, token string, now time.Time) *awsdynamodb.UpdateItemInput {
		return &awsdynamodb.UpdateItemInput{
			TableName:                &table,
			Key:                      idKey(key),
			UpdateExpression:         aws.String("SET #s = :s, #d = :d, expiration = :e"),
			ConditionExpression:      aws.String("owner_token = :t AND #s = :p"),
			ExpressionAttributeNames: map[string]string{"#s": "status", "#d": "data"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":s": &types.AttributeValueMemberS{Value: "COMPLETED"},
				":d": &types.AttributeValueMemberS{Value: response},
				":e": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
				":t": &types.AttributeValueMemberS{Value: token},
				":p": &types.AttributeValueMemberS{Value: "INPROGRESS"},
			},
		}
	}
	return put, update
}
