package grpcgo_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A retry with the key of a completed call gets its response and its
// response metadata again, marked as a replay, without running the
// handler.
func TestRetryGetsTheStoredResponseAndMetadata(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New()))
	req := &testpb.CreateOrderRequest{Parent: "shops/1", Item: "book", Quantity: 2, Labels: map[string]string{"a": "1", "b": "2"}, RequestId: "8e03978e-40d5-43e8-bc93-6894a57f9324"}

	var header, trailer metadata.MD
	first, err := client.CreateOrder(t.Context(), req, grpc.Header(&header), grpc.Trailer(&trailer))
	require.NoError(t, err)
	assert.False(t, grpcidempotency.Replayed(header))

	var header2, trailer2 metadata.MD
	second, err := client.CreateOrder(t.Context(), req, grpc.Header(&header2), grpc.Trailer(&trailer2))
	require.NoError(t, err)
	assert.True(t, proto.Equal(first, second), "%v != %v", first, second)
	assert.EqualValues(t, 1, second.GetRun())
	assert.True(t, grpcidempotency.Replayed(header2))
	assert.Equal(t, header.Get("x-run"), header2.Get("x-run"))
	assert.Equal(t, header.Get("x-trace-bin"), header2.Get("x-trace-bin"), "binary metadata is replayed byte for byte")
	assert.Equal(t, []string{"run-1"}, trailer2.Get("x-done"))
	assert.Equal(t, 1, svc.Runs("create:"+req.RequestId))
}

// The key may come in the idempotency-key metadata, for methods whose
// request has no request_id field.
func TestMetadataCarriesTheKeyOfRequestsWithoutAField(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New()))
	ctx := withKey(t.Context(), "charge-1")
	for range 3 {
		resp, err := client.Charge(ctx, &testpb.ChargeRequest{Order: "orders/1", Amount: 100})
		require.NoError(t, err)
		assert.EqualValues(t, 1, resp.GetRun())
	}
	// Without a key, the call runs unprotected: AIP-155's request IDs are
	// optional.
	for range 2 {
		_, err := client.Charge(t.Context(), &testpb.ChargeRequest{Order: "orders/1"})
		require.NoError(t, err)
	}
	assert.Equal(t, 1, svc.Runs("charge:[charge-1]"))
	assert.Equal(t, 2, svc.Runs("charge:[]"))
}

// Which key wins when a call carries both, and where the key is read,
// per method.
func TestKeySourcesPerMethod(t *testing.T) {
	type call struct{ field, md string }
	for _, tc := range []struct {
		keys          grpcidempotency.KeySource
		first, second call
		want          string // replay, run or reused
	}{
		{grpcidempotency.FieldFirst, call{"f1", "m1"}, call{"f1", "m2"}, "replay"},
		{grpcidempotency.FieldFirst, call{"f1", "m1"}, call{"f2", "m1"}, "run"},
		{grpcidempotency.FieldFirst, call{"", "m1"}, call{"", "m1"}, "replay"},
		{grpcidempotency.MetadataFirst, call{"f1", "m1"}, call{"f1", "m2"}, "run"},
		{grpcidempotency.MetadataFirst, call{"f1", "m1"}, call{"f2", "m1"}, "reused"},
		{grpcidempotency.MetadataFirst, call{"f1", ""}, call{"f1", ""}, "replay"},
		{grpcidempotency.FieldOnly, call{"", "m1"}, call{"", "m1"}, "run"},
		{grpcidempotency.FieldOnly, call{"f1", "m1"}, call{"f1", "m2"}, "replay"},
		{grpcidempotency.MetadataOnly, call{"f1", ""}, call{"f1", ""}, "run"},
		{grpcidempotency.MetadataOnly, call{"f1", "m1"}, call{"f2", "m1"}, "reused"},
	} {
		t.Run(tc.keys.String()+"/"+tc.want, func(t *testing.T) {
			svc := newOrders()
			client := dial(t, serve(t, svc, memory.New(),
				grpcidempotency.WithMethodPolicy(testpb.Orders_CreateOrder_FullMethodName, grpcidempotency.Policy{Keys: tc.keys})))
			send := func(c call) (metadata.MD, error) {
				ctx := t.Context()
				if c.md != "" {
					ctx = withKey(ctx, c.md)
				}
				var header metadata.MD
				_, err := client.CreateOrder(ctx, &testpb.CreateOrderRequest{Item: "x", RequestId: c.field}, grpc.Header(&header))
				return header, err
			}
			_, err := send(tc.first)
			require.NoError(t, err)
			header, err := send(tc.second)
			switch tc.want {
			case "replay":
				require.NoError(t, err)
				assert.True(t, grpcidempotency.Replayed(header))
				assert.Equal(t, 1, svc.Total())
			case "run":
				require.NoError(t, err)
				assert.False(t, grpcidempotency.Replayed(header))
				assert.Equal(t, 2, svc.Total())
			case "reused":
				assert.Equal(t, codes.InvalidArgument, status.Code(err))
				assert.Equal(t, grpcidempotency.ReasonKeyReused, reasonOf(err))
				assert.Equal(t, 1, svc.Total())
			}
		})
	}
}

// A method that requires a key refuses calls without one, and every
// method refuses keys that are not valid, without running the handler.
func TestMissingAndInvalidKeys(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New(),
		grpcidempotency.WithMethodPolicy(testpb.Orders_CreateOrder_FullMethodName, grpcidempotency.Policy{RequireKey: true})))

	_, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "x"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Equal(t, grpcidempotency.ReasonMissingKey, reasonOf(err))
	bad, ok := detail[*errdetails.BadRequest](err)
	require.True(t, ok, "a BadRequest names the field")
	assert.Equal(t, "request_id", bad.GetFieldViolations()[0].GetField())

	long := strings.Repeat("k", grpcidempotency.MaxKeyLength)
	_, err = client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "x", RequestId: long})
	require.NoError(t, err, "keys of MaxKeyLength characters are accepted")
	_, err = client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "x", RequestId: strings.Repeat("é", grpcidempotency.MaxKeyLength)})
	require.NoError(t, err, "characters, not bytes")

	for name, send := range map[string]func() error{
		"too long": func() error {
			_, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "x", RequestId: long + "k"})
			return err
		},
		"control characters": func() error {
			_, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "x", RequestId: "a\tb"})
			return err
		},
		"empty metadata": func() error {
			_, err := client.Charge(withKey(t.Context(), ""), &testpb.ChargeRequest{})
			return err
		},
		"several metadata values": func() error {
			_, err := client.Charge(withKey(withKey(t.Context(), "a"), "b"), &testpb.ChargeRequest{})
			return err
		},
	} {
		err := send()
		assert.Equal(t, codes.InvalidArgument, status.Code(err), name)
		assert.Equal(t, grpcidempotency.ReasonInvalidKey, reasonOf(err), name)
	}
	assert.Equal(t, 2, svc.Total(), "only the valid keys ran")

	// The same metadata key twice is one key.
	_, err = client.Charge(withKey(withKey(t.Context(), "a"), "a"), &testpb.ChargeRequest{})
	require.NoError(t, err)
}

// The same key with another request, or with the same request to another
// method, is refused, and the handler does not run.
func TestKeyReusedForAnotherRequest(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New()))
	_, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "book", Labels: map[string]string{"a": "1", "b": "2", "c": "3"}, RequestId: "k"})
	require.NoError(t, err)
	// Maps encode deterministically: the same request is the same.
	_, err = client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "book", Labels: map[string]string{"c": "3", "b": "2", "a": "1"}, RequestId: "k"})
	require.NoError(t, err)

	_, err = client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{Item: "pen", RequestId: "k"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Equal(t, grpcidempotency.ReasonKeyReused, reasonOf(err))

	_, err = client.Charge(withKey(t.Context(), "m"), &testpb.ChargeRequest{Order: "orders/1"})
	require.NoError(t, err)
	_, err = client.CreateOrder(withKey(t.Context(), "m"), &testpb.CreateOrderRequest{})
	assert.Equal(t, grpcidempotency.ReasonKeyReused, reasonOf(err), "another method")
	assert.Equal(t, 2, svc.Total())
}

// A duplicate that arrives while the first call runs gets ABORTED with a
// RetryInfo; with idempotency.WithWait, it waits for the first call's
// response instead.
func TestDuplicateWhileTheFirstRuns(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(map[bool]string{false: "aborted", true: "WithWait"}[wait], func(t *testing.T) {
			svc := newOrders()
			svc.Hold, svc.Entered = make(chan struct{}), make(chan struct{}, 1)
			var opts []grpcidempotency.ServerOption
			if wait {
				opts = append(opts, grpcidempotency.WithGuardOptions(idempotency.WithWait(time.Minute)))
			}
			client := dial(t, serve(t, svc, memory.New(), opts...))
			req := &testpb.CreateOrderRequest{Item: "x", RequestId: "k"}
			first := make(chan error, 1)
			go func() {
				_, err := client.CreateOrder(t.Context(), req)
				first <- err
			}()
			<-svc.Entered
			if !wait {
				_, err := client.CreateOrder(t.Context(), req)
				assert.Equal(t, codes.Aborted, status.Code(err))
				assert.Equal(t, grpcidempotency.ReasonKeyInUse, reasonOf(err))
				info, ok := detail[*errdetails.RetryInfo](err)
				require.True(t, ok)
				d := info.GetRetryDelay().AsDuration()
				assert.True(t, d >= 10*time.Millisecond && d <= 2*time.Second, "delay %v, capped at the default 2 seconds", d)
				close(svc.Hold)
				require.NoError(t, <-first)
				return
			}
			second := make(chan *testpb.Order, 1)
			go func() {
				resp, err := client.CreateOrder(t.Context(), req)
				assert.NoError(t, err)
				second <- resp
			}()
			close(svc.Hold)
			require.NoError(t, <-first)
			assert.EqualValues(t, 1, (<-second).GetRun())
			assert.Equal(t, 1, svc.Total())
		})
	}
}

// 100 identical calls at once run the handler once, and all get its
// response.
func TestConcurrentIdenticalCallsRunOnce(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New(), grpcidempotency.WithGuardOptions(idempotency.WithWait(time.Minute))))
	req := &testpb.CreateOrderRequest{Item: "x", RequestId: "burst"}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			resp, err := client.CreateOrder(t.Context(), req)
			if assert.NoError(t, err) {
				assert.EqualValues(t, 1, resp.GetRun())
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, svc.Runs("create:burst"))
}

// Each status code of the table in the package documentation: stored
// ones are replayed with their message and details; the others release
// the key, so that a retry runs the handler again.
func TestWhichStatusCodesAreStored(t *testing.T) {
	notStored := map[codes.Code]bool{
		codes.Canceled: true, codes.DeadlineExceeded: true, codes.Unauthenticated: true, codes.PermissionDenied: true,
		codes.ResourceExhausted: true, codes.Aborted: true, codes.Unavailable: true, codes.Unimplemented: true,
		codes.Internal: true, codes.Unknown: true, codes.DataLoss: true,
	}
	serverErrors := map[codes.Code]bool{codes.Internal: true, codes.Unknown: true, codes.DataLoss: true}
	for _, storeServerErrors := range []bool{false, true} {
		svc := newOrders()
		var opts []grpcidempotency.ServerOption
		if storeServerErrors {
			opts = append(opts, grpcidempotency.WithStoreServerErrors())
		}
		client := dial(t, serve(t, svc, memory.New(), opts...))
		for c := codes.OK; c <= codes.Unauthenticated; c++ {
			stored := !notStored[c] || storeServerErrors && serverErrors[c]
			name := c.String()
			if storeServerErrors {
				name += "/WithStoreServerErrors"
			}
			t.Run(name, func(t *testing.T) {
				req := &testpb.CreateOrderRequest{Item: "x", RequestId: name, FailCode: int32(c)}
				_, err := client.CreateOrder(t.Context(), req)
				assert.Equal(t, c, status.Code(err))
				var header, trailer metadata.MD
				_, err2 := client.CreateOrder(t.Context(), req, grpc.Header(&header), grpc.Trailer(&trailer))
				assert.Equal(t, c, status.Code(err2))
				if !stored {
					assert.Equal(t, 2, svc.Runs("create:"+name), "released: the retry runs")
					assert.False(t, grpcidempotency.Replayed(header))
					return
				}
				assert.Equal(t, 1, svc.Runs("create:"+name), "stored: the retry is a replay")
				assert.True(t, grpcidempotency.Replayed(header))
				assert.Equal(t, []string{"1"}, header.Get("x-run"))
				assert.Equal(t, []string{"run-1"}, trailer.Get("x-done"))
				if c != codes.OK {
					assert.Equal(t, status.Convert(err).Message(), status.Convert(err2).Message())
					msg, ok := detail[*errdetails.LocalizedMessage](err2)
					require.True(t, ok, "details are replayed")
					assert.Equal(t, "run 1", msg.GetMessage())
				}
			})
		}
	}
}

// A handler that marks its result as not executed has it returned but not
// stored.
func TestMarkNotExecutedReleasesTheKey(t *testing.T) {
	svc := newOrders()
	svc.Before = func(ctx context.Context) { assert.True(t, idempotency.MarkNotExecuted(ctx)) }
	client := dial(t, serve(t, svc, memory.New()))
	req := &testpb.CreateOrderRequest{Item: "x", RequestId: "k", FailCode: int32(codes.InvalidArgument)}
	for range 2 {
		_, err := client.CreateOrder(t.Context(), req)
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
	}
	assert.Equal(t, 2, svc.Runs("create:k"))
	assert.False(t, idempotency.MarkNotExecuted(t.Context()))
}

// Streaming calls do not go through the unary interceptor: they run
// every time, keys or not.
func TestStreamingCallsPassThrough(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New()))
	for range 2 {
		stream, err := client.WatchOrders(t.Context(), &testpb.WatchOrdersRequest{RequestId: "k", Count: 2})
		require.NoError(t, err)
		n := 0
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
			n++
		}
		assert.Equal(t, 2, n)
	}
	assert.Equal(t, 2, svc.Runs("watch:k"))
}

// A method that Skip names runs unprotected, and methods without a key
// pass through.
func TestSkippedMethodsRunUnprotected(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New(),
		grpcidempotency.WithPolicy(grpcidempotency.Policy{RequireKey: true}),
		grpcidempotency.WithMethodPolicy(testpb.Orders_GetOrder_FullMethodName, grpcidempotency.Policy{Skip: true})))
	_, err := client.GetOrder(t.Context(), &testpb.GetOrderRequest{Name: "orders/1"})
	require.NoError(t, err)
	_, err = client.Charge(t.Context(), &testpb.ChargeRequest{})
	assert.Equal(t, grpcidempotency.ReasonMissingKey, reasonOf(err), "WithPolicy is the default of the others")
}

// A store that fails before the handler ran answers UNAVAILABLE with a
// RetryInfo: nothing happened, and a retry with the key is safe.
func TestStoreFailureIsUnavailable(t *testing.T) {
	svc := newOrders()
	store := faultstore.New(memory.New())
	store.Fault = faultstore.On(faultstore.OpPut, 1, faultstore.FailBefore)
	client := dial(t, serve(t, svc, store))
	req := &testpb.CreateOrderRequest{Item: "x", RequestId: "k"}
	_, err := client.CreateOrder(t.Context(), req)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, grpcidempotency.ReasonStoreUnavailable, reasonOf(err))
	info, ok := detail[*errdetails.RetryInfo](err)
	require.True(t, ok)
	assert.Equal(t, time.Second, info.GetRetryDelay().AsDuration())
	assert.Equal(t, 0, svc.Total())
	_, err = client.CreateOrder(t.Context(), req)
	require.NoError(t, err)
}

// Options are checked when the interceptor is made, all problems at once.
func TestOptionsAreChecked(t *testing.T) {
	_, err := grpcgo.NewServerInterceptor(nil)
	assert.ErrorContains(t, err, "nil persistence.Store")
	_, err = grpcgo.NewServerInterceptor(memory.New(),
		grpcidempotency.WithKeyField("not a field"),
		grpcidempotency.WithMetadataKey("Idempotency-Key"),
		grpcidempotency.WithMethodPolicy("CreateOrder", grpcidempotency.Policy{}),
		grpcidempotency.WithPolicy(grpcidempotency.Policy{Skip: true, RequireKey: true}),
		grpcidempotency.WithMaxRetryDelay(0),
		grpcidempotency.WithStoreServerErrors(), grpcidempotency.WithStoreServerErrors(),
	)
	for _, want := range []string{"WithKeyField", "WithMetadataKey", "WithMethodPolicy", "Skip and RequireKey", "WithMaxRetryDelay", "WithStoreServerErrors given twice"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = grpcgo.NewServerInterceptor(memory.New(),
		grpcidempotency.WithKeyField("id"), grpcidempotency.WithKeyFunc(func(proto.Message) string { return "" }))
	assert.ErrorContains(t, err, "give one")
	_, err = grpcgo.NewServerInterceptor(memory.New(), grpcidempotency.WithGuardOptions(idempotency.WithExpiry(0)))
	assert.ErrorContains(t, err, "WithExpiry")
	_, err = grpcgo.NewClientInterceptor(grpcidempotency.WithRetry(grpcidempotency.RetryPolicy{MaxElapsed: time.Hour, KeyWindow: time.Hour}))
	assert.ErrorContains(t, err, "half the KeyWindow")
	_, err = grpcgo.NewClientInterceptor(grpcidempotency.WithKeyedMethods("Charge"))
	assert.ErrorContains(t, err, "full method name")
}
