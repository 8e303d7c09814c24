package dynamodb_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/internal/testing/cpubench"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// BenchmarkPartsDynamoDBLocal splits a wrapped call's CPU time over
// `make compare`'s SDK floor into what its requests cost and what its
// code costs, over the network, against DynamoDB Local, with an
// invocation's deadline as on Lambda. Its sides take turns of 8 calls in
// a shuffled order, and each reports the CPU time of the process per call:
//
//   - floor: make compare's SDK floor, the least requests a call needs (a
//     PutItem of key, status and expiry conditioned on
//     attribute_not_exists(id); for a first call an UpdateItem of the
//     status and the response), and the response's encoding or decoding;
//   - requests: the library's own requests, as its store builds them
//     (the reservation's takeover and held conditions, owner token,
//     in-progress expiry; the completion's fence), sent bare;
//   - store (replay): Store.Put, which builds the request and decodes the
//     record, and the stored response decoded;
//   - lib: the wrapped handler.
//
// requests over floor is what docs/protocol.md's request shape costs; lib
// over requests what the library's code costs.
//
//	go test -run '^$' -bench Parts -count 6 ./persistence/dynamodb/
func BenchmarkPartsDynamoDBLocal(b *testing.B) {
	srv := server{dynamotest.DynamoDBLocal.Shared(b)}
	name := srv.table(b)
	sdk := srv.NewClient()
	recorder := &recordingClient{Client: sdk}
	store := newStore(b, recorder, name)
	h := &paytest.Handler{}
	pay := paytest.Wrap(b, h.Charge, store)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	done := paytest.New()
	if _, err := pay(ctx, done); err != nil {
		b.Fatal(err)
	}
	firstPut, firstUpdate := recorder.put, recorder.update
	if _, err := pay(ctx, done); err != nil {
		b.Fatal(err)
	}
	replayPut := recorder.put
	doneKey := replayPut.Item["id"].(*types.AttributeValueMemberS).Value

	floorKey := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "orders#" + k}}
	}
	floorPut := func(key map[string]types.AttributeValue) (*awsdynamodb.PutItemOutput, error) {
		item := maps.Clone(key)
		item["status"] = &types.AttributeValueMemberS{Value: "INPROGRESS"}
		item["expiration"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}
		return sdk.PutItem(ctx, &awsdynamodb.PutItemInput{
			TableName:                           &name,
			Item:                                item,
			ConditionExpression:                 aws.String("attribute_not_exists(id)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
	}
	floorComplete := func(key map[string]types.AttributeValue, p paytest.Payment) {
		c, _ := h.Charge(ctx, p)
		data, err := json.Marshal(c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sdk.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
			TableName:                &name,
			Key:                      key,
			UpdateExpression:         aws.String("SET #s = :s, #d = :d"),
			ExpressionAttributeNames: map[string]string{"#s": "status", "#d": "data"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":s": &types.AttributeValueMemberS{Value: "COMPLETED"},
				":d": &types.AttributeValueMemberS{Value: string(data)},
			},
		}); err != nil {
			b.Fatal(err)
		}
	}
	floorDone := paytest.New()
	floorDoneKey := floorKey(floorDone.OrderID)
	if _, err := floorPut(floorDoneKey); err != nil {
		b.Fatal(err)
	}
	floorComplete(floorDoneKey, floorDone)

	// A replay: the failed PutItem, and the stored response decoded.
	replayed := func(err error) {
		var failed *types.ConditionalCheckFailedException
		if !errors.As(err, &failed) || len(failed.Item) == 0 {
			b.Fatalf("the reservation of a completed key: %v", err)
		}
		data, _ := failed.Item["data"].(*types.AttributeValueMemberS)
		if data == nil {
			b.Fatal("no response in the record")
		}
		var c paytest.Charge
		if err := json.Unmarshal([]byte(data.Value), &c); err != nil {
			b.Fatal(err)
		}
	}
	rec := &persistence.Record{Key: doneKey, Status: persistence.StatusInProgress, Token: "T", ExpiresAt: time.Now().Add(time.Hour).Truncate(time.Second), InProgressExpiresAt: time.Now().Add(time.Minute)}
	b.Run("Replay", func(b *testing.B) {
		parts(b, []part{
			{"floor", func() { _, err := floorPut(floorDoneKey); replayed(err) }},
			{"requests", func() { _, err := sdk.PutItem(ctx, replayPut, dynamodb.RetryConflicts); replayed(err) }},
			{"store", func() {
				var conflict *persistence.ConflictError
				if err := store.Put(ctx, rec, time.Now()); !errors.As(err, &conflict) || conflict.Existing == nil {
					b.Fatalf("Put over a completed record: %v", err)
				}
				var c paytest.Charge
				if err := json.Unmarshal(conflict.Existing.Response, &c); err != nil {
					b.Fatal(err)
				}
			}},
			{"lib", func() {
				if _, err := pay(ctx, done); err != nil {
					b.Fatal(err)
				}
			}},
		})
	})
	b.Run("FirstCall", func(b *testing.B) {
		parts(b, []part{
			{"floor", func() {
				p := paytest.New()
				key := floorKey(p.OrderID)
				if _, err := floorPut(key); err != nil {
					b.Fatal(err)
				}
				floorComplete(key, p)
			}},
			{"requests", func() {
				p := paytest.New()
				key := &types.AttributeValueMemberS{Value: "payments#" + p.OrderID}
				token := &types.AttributeValueMemberS{Value: p.OrderID[4:]}
				put := *firstPut
				put.Item = maps.Clone(firstPut.Item)
				put.Item["id"], put.Item["owner_token"] = key, token
				put.ExpressionAttributeValues = maps.Clone(firstPut.ExpressionAttributeValues)
				if _, err := sdk.PutItem(ctx, &put, dynamodb.RetryConflicts); err != nil {
					b.Fatal(err)
				}
				c, _ := h.Charge(ctx, p)
				data, err := json.Marshal(c)
				if err != nil {
					b.Fatal(err)
				}
				update := *firstUpdate
				update.Key = map[string]types.AttributeValue{"id": key}
				update.ExpressionAttributeValues = maps.Clone(firstUpdate.ExpressionAttributeValues)
				update.ExpressionAttributeValues[":t"] = token
				update.ExpressionAttributeValues[":d"] = &types.AttributeValueMemberS{Value: string(data)}
				if _, err := sdk.UpdateItem(ctx, &update, dynamodb.RetryConflicts); err != nil {
					b.Fatal(err)
				}
			}},
			{"lib", func() {
				if _, err := pay(ctx, paytest.New()); err != nil {
					b.Fatal(err)
				}
			}},
		})
	})
}

// A part is one side of BenchmarkParts*.
type part struct {
	name string
	call func()
}

// parts runs the sides in turns of 8 calls, in an order shuffled for
// every round of turns, and reports each one's CPU time per call, and
// each one's over the first's (the floor). Each turn carries its side's
// name as a profiler label (go tool pprof -tagfocus side=lib); goroutines
// a side starts, such as a new connection's, carry it too.
func parts(b *testing.B, sides []part) {
	const turn = 8
	for range 10 { // warm the connections and the server's paths
		for _, s := range sides {
			s.call()
		}
	}
	cpu := make([]time.Duration, len(sides))
	labels := make([]context.Context, len(sides))
	for i, s := range sides {
		labels[i] = pprof.WithLabels(context.Background(), pprof.Labels("side", s.name))
	}
	defer pprof.SetGoroutineLabels(context.Background())
	order := make([]int, len(sides))
	for i := range order {
		order[i] = i
	}
	rounds := 0
	for b.Loop() {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			pprof.SetGoroutineLabels(labels[i])
			start := cpubench.ProcessCPU()
			for range turn {
				sides[i].call()
			}
			cpu[i] += cpubench.ProcessCPU() - start
		}
		rounds++
	}
	calls := float64(rounds * turn)
	for i, s := range sides {
		b.ReportMetric(float64(cpu[i].Nanoseconds())/calls, s.name+"-cpu-ns/op")
		if i > 0 {
			b.ReportMetric(float64(cpu[i])/float64(cpu[0]), s.name+"/floor")
		}
	}
}

// recordingClient is the SDK's client, keeping the last PutItem and
// UpdateItem requests the store sent.
type recordingClient struct {
	*awsdynamodb.Client
	put    *awsdynamodb.PutItemInput
	update *awsdynamodb.UpdateItemInput
}

func (c *recordingClient) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	c.put = in
	return c.Client.PutItem(ctx, in, optFns...)
}

func (c *recordingClient) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	c.update = in
	return c.Client.UpdateItem(ctx, in, optFns...)
}
