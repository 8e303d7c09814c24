package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// requestClient is a Client that sends nothing: it answers every call with
// a canned output, so that the benchmarks below measure the store's own
// work (building requests, decoding items) apart from the SDK and the
// network.
type requestClient struct {
	putErr error
	getOut *awsdynamodb.GetItemOutput
	last   any
}

func (c *requestClient) PutItem(_ context.Context, in *awsdynamodb.PutItemInput, _ ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	c.last = in
	if c.putErr != nil {
		return nil, c.putErr
	}
	return &awsdynamodb.PutItemOutput{}, nil
}

func (c *requestClient) GetItem(_ context.Context, in *awsdynamodb.GetItemInput, _ ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	c.last = in
	return c.getOut, nil
}

func (c *requestClient) UpdateItem(_ context.Context, in *awsdynamodb.UpdateItemInput, _ ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	c.last = in
	return &awsdynamodb.UpdateItemOutput{}, nil
}

func (c *requestClient) DeleteItem(_ context.Context, in *awsdynamodb.DeleteItemInput, _ ...func(*awsdynamodb.Options)) (*awsdynamodb.DeleteItemOutput, error) {
	c.last = in
	return &awsdynamodb.DeleteItemOutput{}, nil
}

func (c *requestClient) TransactWriteItems(_ context.Context, in *awsdynamodb.TransactWriteItemsInput, _ ...func(*awsdynamodb.Options)) (*awsdynamodb.TransactWriteItemsOutput, error) {
	c.last = in
	return &awsdynamodb.TransactWriteItemsOutput{}, nil
}

// benchResponse is an API Gateway response as the core stores it.
var benchResponse = []byte(`{"statusCode":201,"headers":{"Content-Type":"application/json"},"multiValueHeaders":null,"body":"{\"payment_id\":\"pay_123\",\"status\":\"created\"}"}`)

// benchRecord is a reservation as the core writes it: a 64-character key
// (prefix and SHA-256), a token, an in-progress expiry.
func benchRecord(now time.Time) *persistence.Record {
	return &persistence.Record{
		Key:                 "orders#9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour),
		InProgressExpiresAt: now.Add(30 * time.Second),
		Token:               "QGZWM5GVFV3PZ4LSYUBE4RK7WA",
	}
}

// benchRecords returns benchRecord's reservation and its completion with
// benchResponse.
func benchRecords(now time.Time) (reservation, completion *persistence.Record) {
	reservation = benchRecord(now)
	done := *reservation
	done.Status = persistence.StatusCompleted
	done.Response = benchResponse
	return reservation, &done
}

// storedItem is the item the store writes for rec, as DynamoDB returns it.
func storedItem(b *testing.B, rec *persistence.Record) map[string]types.AttributeValue {
	b.Helper()
	c := &requestClient{}
	s, err := dynamodb.New(c, "idempotency")
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Put(b.Context(), rec, time.Now()); err != nil {
		b.Fatal(err)
	}
	item := c.last.(*awsdynamodb.PutItemInput).Item
	if err := s.Update(b.Context(), rec); err != nil {
		b.Fatal(err)
	}
	up := c.last.(*awsdynamodb.UpdateItemInput)
	for placeholder, name := range up.ExpressionAttributeNames {
		if v, ok := up.ExpressionAttributeValues[":"+strings.TrimPrefix(placeholder, "#")]; ok {
			item[name] = v
		}
	}
	return item
}

// BenchmarkRequest measures what the store does around a request, without
// the SDK or a network: building the PutItem, UpdateItem, GetItem and
// DeleteItem inputs for a record, and decoding the item a conflict or a
// read returns.
func BenchmarkRequest(b *testing.B) {
	now := time.Now().Truncate(time.Second)
	rec, done := benchRecords(now)
	large := *done
	large.Response = bytes.Repeat(benchResponse, 20<<10/len(benchResponse)+1)
	item := storedItem(b, done)

	run := func(name string, c *requestClient, op func(s *dynamodb.Store) error) {
		b.Run(name, func(b *testing.B) {
			s, err := dynamodb.New(c, "idempotency")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := op(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	ctx := b.Context()
	run("PutItem", &requestClient{}, func(s *dynamodb.Store) error { return s.Put(ctx, rec, now) })
	run("PutItem_conflict", &requestClient{putErr: &types.ConditionalCheckFailedException{Item: item}}, func(s *dynamodb.Store) error {
		var conflict *persistence.ConflictError
		if err := s.Put(ctx, rec, now); !errors.As(err, &conflict) || conflict.Existing == nil {
			return errors.New("no conflict with the existing record")
		}
		return nil
	})
	run("UpdateItem", &requestClient{}, func(s *dynamodb.Store) error { return s.Update(ctx, done) })
	run("UpdateItem_20KiB_gzip", &requestClient{}, func(s *dynamodb.Store) error { return s.Update(ctx, &large) })
	run("GetItem", &requestClient{getOut: &awsdynamodb.GetItemOutput{Item: item}}, func(s *dynamodb.Store) error {
		_, err := s.Get(ctx, rec.Key)
		return err
	})
	run("DeleteItem", &requestClient{}, func(s *dynamodb.Store) error { return s.Delete(ctx, rec.Key, rec.Token) })
}

// cannedHTTP is an aws.HTTPClient that answers every DynamoDB request
// locally: the SDK's whole request path (serialisation, signing, retries,
// deserialisation) runs, and the network does not.
type cannedHTTP struct {
	conflict string // the body of a failed conditional PutItem
}

func (c *cannedHTTP) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	status, body := http.StatusOK, "{}"
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".PutItem") && c.conflict != "" {
		status, body = http.StatusBadRequest, c.conflict
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	return &http.Response{
		StatusCode:    status,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// BenchmarkSDK measures a first call's requests (PutItem, UpdateItem) and a
// replay's (a PutItem that fails its condition and returns the existing
// item, as DynamoDB does with ALL_OLD) through the AWS SDK's real client,
// against an HTTP client that answers locally: the CPU and allocations a
// store call costs the client process, apart from the network.
func BenchmarkSDK(b *testing.B) {
	now := time.Now().Truncate(time.Second)
	rec, done := benchRecords(now)
	conflict := `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{` +
		`"id":{"S":"` + rec.Key + `"},"expiration":{"N":"1767229200"},"in_progress_expiration":{"N":"1767225630000"},` +
		`"status":{"S":"COMPLETED"},"owner_token":{"S":"QGZWM5GVFV3PZ4LSYUBE4RK7WA"},` +
		`"data":{"S":"{\"statusCode\":201,\"headers\":{\"Content-Type\":\"application/json\"},\"multiValueHeaders\":null,\"body\":\"{\\\"payment_id\\\":\\\"pay_123\\\",\\\"status\\\":\\\"created\\\"}\"}"}}}`

	store := func(b *testing.B, h *cannedHTTP) *dynamodb.Store {
		client := awsdynamodb.New(awsdynamodb.Options{
			Region:       "us-east-1",
			Credentials:  dynalite.Credentials,
			BaseEndpoint: aws.String("http://127.0.0.1:8000"),
			HTTPClient:   h,
		})
		s, err := dynamodb.New(client, "idempotency")
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("FirstCall", func(b *testing.B) {
		s := store(b, &cannedHTTP{})
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Put(ctx, rec, now); err != nil {
				b.Fatal(err)
			}
			if err := s.Update(ctx, done); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Replay", func(b *testing.B) {
		s := store(b, &cannedHTTP{conflict: conflict})
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			var c *persistence.ConflictError
			if err := s.Put(ctx, rec, now); !errors.As(err, &c) || c.Existing == nil || c.Existing.Status != persistence.StatusCompleted {
				b.Fatalf("Put: %v", err)
			}
		}
	})
}

// BenchmarkSDKWrap is BenchmarkFloor without the network: a wrapped
// handler's first call and replay through the AWS SDK's real client, next
// to the bare SDK requests they need (as in BenchmarkFloor), against an HTTP
// client that answers locally, so that ns/op is the client's CPU alone.
// The ratio of Wrap* to Bare* is the library's cost over the SDK's floor.
func BenchmarkSDKWrap(b *testing.B) {
	var key string
	h := &paytest.Handler{}
	charge := func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
		key, _ = idempotency.KeyFromContext(ctx)
		return h.Charge(ctx, p)
	}
	newClient := func(c *cannedHTTP) *awsdynamodb.Client {
		return awsdynamodb.New(awsdynamodb.Options{
			Region:       "us-east-1",
			Credentials:  dynalite.Credentials,
			BaseEndpoint: aws.String("http://127.0.0.1:8000"),
			HTTPClient:   c,
		})
	}
	client := newClient(&cannedHTTP{})
	pay := paytest.Wrap(b, charge, newStore(b, client, "idempotency"))
	done := paytest.New()
	first, err := pay(b.Context(), done)
	if err != nil {
		b.Fatal(err)
	}
	response := `{"charge_id":"` + first.ChargeID + `","amount":4200}`
	now := time.Now()
	conflict := `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{` +
		`"id":{"S":"` + key + `"},"expiration":{"N":"` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `"},"in_progress_expiration":{"N":"` + strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10) + `"},` +
		`"status":{"S":"COMPLETED"},"owner_token":{"S":"QGZWM5GVFV3PZ4LSYUBE4RK7WA"},"data":{"S":` + strconv.Quote(response) + `}}}`
	conflicting := newClient(&cannedHTTP{conflict: conflict})
	payReplay := paytest.Wrap(b, charge, newStore(b, conflicting, "idempotency"))

	put, update := bareRequests("idempotency", response)
	ctx := b.Context()
	payments := make([]paytest.Payment, 1024)
	for i := range payments {
		payments[i] = paytest.New()
	}
	b.Run("BareFirstCall", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			p := payments[i%len(payments)]
			now := time.Now()
			if _, err := client.PutItem(ctx, put("payments#"+p.OrderID, p.OrderID, now)); err != nil {
				b.Fatal(err)
			}
			if _, err := client.UpdateItem(ctx, update("payments#"+p.OrderID, p.OrderID, now)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WrapFirstCall", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := pay(ctx, payments[i%len(payments)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	conflicted := func(b *testing.B, err error) {
		var failed *types.ConditionalCheckFailedException
		if !errors.As(err, &failed) || len(failed.Item) == 0 {
			b.Fatalf("PutItem: %v", err)
		}
	}
	b.Run("BareReplay", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, err := conflicting.PutItem(ctx, put(key, "t2", time.Now()))
			conflicted(b, err)
		}
	})
	// The bare replay with the library's reservation condition (the
	// takeover of expired and lapsed records), taken from the store's own
	// PutItem, so that the difference to WrapReplay is the library's code,
	// not its request (its values are of one moment: the canned server
	// evaluates no condition).
	captured := &requestClient{}
	if err := newStore(b, captured, "idempotency").Put(ctx, benchRecord(now), now); err != nil {
		b.Fatal(err)
	}
	takeover := captured.last.(*awsdynamodb.PutItemInput)
	b.Run("BareReplayTakeoverCondition", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in := put(key, "t2", time.Now())
			in.ConditionExpression = takeover.ConditionExpression
			in.ExpressionAttributeNames = takeover.ExpressionAttributeNames
			in.ExpressionAttributeValues = maps.Clone(takeover.ExpressionAttributeValues)
			_, err := conflicting.PutItem(ctx, in)
			conflicted(b, err)
		}
	})
	wrapReplay := func() {
		if out, err := payReplay(ctx, done); err != nil || out != first {
			b.Fatalf("replay: %v, %v", out, err)
		}
	}
	b.Run("WrapReplay", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			wrapReplay()
		}
	})
	// The ratios, from the bare requests and the wrapped call alternating
	// in one loop (see ratio), so that a change in the machine's load
	// weighs on both alike.
	var p paytest.Payment
	i := 0
	next := func() { p = payments[i%len(payments)]; i++ }
	b.Run("FirstCallRatio", func(b *testing.B) {
		ratio(b, func() {
			now := time.Now()
			if _, err := client.PutItem(ctx, put("payments#"+p.OrderID, p.OrderID, now)); err != nil {
				b.Fatal(err)
			}
			if _, err := client.UpdateItem(ctx, update("payments#"+p.OrderID, p.OrderID, now)); err != nil {
				b.Fatal(err)
			}
		}, func() {
			if _, err := pay(ctx, p); err != nil {
				b.Fatal(err)
			}
		}, next)
	})
	b.Run("ReplayRatio", func(b *testing.B) {
		ratio(b, func() {
			_, err := conflicting.PutItem(ctx, put(key, "t2", time.Now()))
			conflicted(b, err)
		}, wrapReplay, nil)
	})
}
