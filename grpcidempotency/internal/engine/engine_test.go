package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
)

// The stored codes are the table of the package documentation.
func TestStoresIsTheTable(t *testing.T) {
	stored := []code.Code{code.Code_OK, code.Code_INVALID_ARGUMENT, code.Code_NOT_FOUND, code.Code_ALREADY_EXISTS,
		code.Code_FAILED_PRECONDITION, code.Code_OUT_OF_RANGE}
	serverErrors := []code.Code{code.Code_INTERNAL, code.Code_UNKNOWN, code.Code_DATA_LOSS}
	for c := range code.Code_name {
		c := code.Code(c)
		switch {
		case contains(stored, c):
			assert.True(t, Stores(c, false), c)
		case contains(serverErrors, c):
			assert.False(t, Stores(c, false), c)
			assert.True(t, Stores(c, true), c)
		default:
			assert.False(t, Stores(c, false), c)
			assert.False(t, Stores(c, true), c)
		}
	}
}

func contains(cs []code.Code, c code.Code) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// What is stored is replayed as it was: the message, the status with its
// details, the metadata.
func TestStoredFormRoundTrips(t *testing.T) {
	resp := &testpb.Order{Name: "orders/1", Labels: map[string]string{"b": "2", "a": "1"}, Run: 3}
	b, err := encode(&Result{Response: resp, Header: map[string][]string{"x-run": {"1", "2"}}, Trailer: map[string][]string{"x-done": {"yes"}}})
	require.NoError(t, err)
	r, err := decode(b)
	require.NoError(t, err)
	assert.True(t, proto.Equal(resp, r.Response))
	assert.Equal(t, []string{"1", "2"}, r.Header["x-run"])
	assert.Equal(t, []string{"yes"}, r.Trailer["x-done"])

	detail, err := anypb.New(&errdetails.ErrorInfo{Reason: "R", Domain: "d"})
	require.NoError(t, err)
	st := &spb.Status{Code: int32(code.Code_NOT_FOUND), Message: "no order", Details: []*anypb.Any{detail}}
	b, err = encode(&Result{Status: st})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"code":5`, "readable")
	r, err = decode(b)
	require.NoError(t, err)
	assert.True(t, proto.Equal(st, r.Status))

	_, err = encode(&Result{})
	assert.Error(t, err, "neither a response nor an error")
	_, err = decode([]byte(`{"type":"no.such.Type"}`))
	assert.ErrorContains(t, err, "no.such.Type")
}

// Keys are read by the policy's sources, in its order, and checked.
func TestKeyOf(t *testing.T) {
	cfg := &Config{KeyPlace: KeyPlace{KeyField: DefaultKeyField, MetadataKey: DefaultMetadataKey}}
	withField := &testpb.CreateOrderRequest{RequestId: "f"}
	for _, tc := range []struct {
		keys     KeySource
		req      proto.Message
		md       []string
		key      string
		from     source
		invalid  bool
		scenario string
	}{
		{FieldFirst, withField, []string{"m"}, "f", fromField, false, "field wins"},
		{FieldFirst, &testpb.CreateOrderRequest{}, []string{"m"}, "m", fromMetadata, false, "empty field"},
		{MetadataFirst, withField, []string{"m"}, "m", fromMetadata, false, "metadata wins"},
		{MetadataFirst, withField, nil, "f", fromField, false, "no metadata"},
		{FieldOnly, &testpb.CreateOrderRequest{}, []string{"m"}, "", noSource, false, "field only"},
		{MetadataOnly, withField, nil, "", noSource, false, "metadata only"},
		{FieldFirst, &testpb.ChargeRequest{}, []string{"m", "m"}, "m", fromMetadata, false, "no such field; one key twice"},
		{FieldFirst, &testpb.ChargeRequest{}, []string{"m", "n"}, "", fromMetadata, true, "two keys"},
		{FieldFirst, &testpb.ChargeRequest{}, []string{""}, "", fromMetadata, true, "empty metadata"},
		{FieldFirst, &testpb.CreateOrderRequest{RequestId: strings.Repeat("x", 256)}, nil, "", fromField, true, "too long"},
		{FieldFirst, &testpb.CreateOrderRequest{RequestId: "a\x7fb"}, nil, "", fromField, true, "control character"},
	} {
		key, from, reason := cfg.keyOf(Policy{Keys: tc.keys}, &Call{Request: tc.req, Metadata: tc.md})
		assert.Equal(t, tc.from, from, tc.scenario)
		if tc.invalid {
			assert.NotEmpty(t, reason, tc.scenario)
			continue
		}
		assert.Empty(t, reason, tc.scenario)
		assert.Equal(t, tc.key, key, tc.scenario)
	}
	// A field of the name that is not a singular string is no key field.
	s, err := structpb.NewStruct(map[string]any{"request_id": "x"})
	require.NoError(t, err)
	_, from, _ := cfg.keyOf(Policy{}, &Call{Request: s})
	assert.Equal(t, noSource, from)
}

// The fingerprint covers the method and the request, deterministically.
func TestFingerprint(t *testing.T) {
	a := &testpb.CreateOrderRequest{Item: "x", Labels: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}}
	b := proto.Clone(a).(*testpb.CreateOrderRequest)
	fa, err := fingerprint("/s.S/M", a)
	require.NoError(t, err)
	for range 20 { // map iteration order varies from run to run
		fb, err := fingerprint("/s.S/M", b)
		require.NoError(t, err)
		assert.Equal(t, fa, fb)
	}
	other, err := fingerprint("/s.S/N", a)
	require.NoError(t, err)
	assert.NotEqual(t, fa, other)
	b.Item = "y"
	changed, err := fingerprint("/s.S/M", b)
	require.NoError(t, err)
	assert.NotEqual(t, fa, changed)
}

// The client retries UNAVAILABLE, and ABORTED only with a RetryInfo,
// whose delay it takes.
func TestRetryDecisions(t *testing.T) {
	p, err := RetryPolicy{}.Resolve()
	require.NoError(t, err)
	assert.Equal(t, RetryPolicy{MaxAttempts: 5, MaxElapsed: time.Minute, KeyWindow: time.Hour, BaseDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}, p)
	info, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(300 * time.Millisecond)})
	require.NoError(t, err)
	for _, tc := range []struct {
		st    *spb.Status
		again bool
		wait  time.Duration // 0: a backoff
	}{
		{&spb.Status{Code: int32(code.Code_UNAVAILABLE)}, true, 0},
		{&spb.Status{Code: int32(code.Code_UNAVAILABLE), Details: []*anypb.Any{info}}, true, 300 * time.Millisecond},
		{&spb.Status{Code: int32(code.Code_ABORTED), Details: []*anypb.Any{info}}, true, 300 * time.Millisecond},
		{&spb.Status{Code: int32(code.Code_ABORTED)}, false, 0},
		{&spb.Status{Code: int32(code.Code_RESOURCE_EXHAUSTED), Details: []*anypb.Any{info}}, false, 0},
		{&spb.Status{Code: int32(code.Code_INTERNAL)}, false, 0},
	} {
		wait, again := p.retry(tc.st, 1)
		assert.Equal(t, tc.again, again, tc.st)
		if tc.wait > 0 {
			assert.Equal(t, tc.wait, wait)
		} else if again {
			assert.True(t, wait >= p.BaseDelay/2 && wait <= p.BaseDelay, "backoff %v", wait)
		}
	}
	for attempt := 1; attempt < 100; attempt++ {
		assert.LessOrEqual(t, p.backoff(attempt), p.MaxDelay)
	}
	_, err = RetryPolicy{MaxElapsed: 31 * time.Minute}.Resolve()
	assert.ErrorContains(t, err, "half the KeyWindow")
}

// Decoding a stored form never panics, whatever it holds.
func FuzzDecode(f *testing.F) {
	ok, _ := encode(&Result{Response: &testpb.Order{Name: "x"}, Header: map[string][]string{"k": {"v"}}})
	f.Add(ok)
	f.Add([]byte(`{"status":{"code":5,"details":["AAAA"]}}`))
	f.Add([]byte(`{"type":"retrysafe.test.orders.v1.Order","response":"CgF4"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decode(b)
	})
}
