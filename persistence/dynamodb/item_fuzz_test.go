package dynamodb

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/internal/epoch"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
)

// unusedClient is a Client for tests that never send a request.
type unusedClient struct{ Client }

// fuzzStores returns stores for the fuzz targets: default-like options with a
// low compression threshold, a sort-key table, and a small item size limit.
var fuzzStores = sync.OnceValues(func() ([3]*Store, error) {
	var stores [3]*Store
	var err error
	if stores[0], err = New(unusedClient{}, "table", func(o *Options) { o.CompressAbove = 64 }); err != nil {
		return stores, err
	}
	if stores[1], err = New(unusedClient{}, "table", func(o *Options) { o.SortKeyAttr = "sk"; o.StaticPKValue = "idempotency#f" }); err != nil {
		return stores, err
	}
	stores[2], err = New(unusedClient{}, "table", func(o *Options) { o.MaxItemSize = 512; o.CompressAbove = 128 })
	return stores, err
})

func testStores(t *testing.T) (plain, sortKey, small *Store) {
	t.Helper()
	stores, err := fuzzStores()
	if err != nil {
		t.Fatal(err)
	}
	return stores[0], stores[1], stores[2]
}

// FuzzItemRoundTrip checks that every record the store accepts maps to an
// item (for Put) and to an update (for Update) that map back to the same
// record, and that the item carries only what DynamoDB can transport
// exactly: valid UTF-8 in string attributes, and an item no larger than
// MaxItemSize once Update has fitted it.
func FuzzItemRoundTrip(f *testing.F) {
	f.Add("orders#9f86d081884c7d65", "INPROGRESS", int64(1767225600), int64(1767225630123), "hash", "TOKEN1", []byte(nil), false, "", "")
	f.Add("k", "COMPLETED", int64(1767225600), int64(0), "", "t", []byte(`{"statusCode":201,"body":"{\"id\":\"p_1\"}"}`), false, "", "")
	f.Add("k", "COMPLETED", int64(-62135596800), int64(0), "", "", []byte{}, true, "", "")
	f.Add("Zoë#東京", "COMPLETED", int64(0), int64(-1), "\xff", "tok\xfe", []byte("\x00\x01\xff"), false, "CardDeclinedError", "réessayez \xc3")
	f.Add("k", "COMPLETED", int64(1<<40), int64(1<<50), "h", "t", bytes.Repeat([]byte(`{"n":1,"id":"abc"},`), 200), false, "", "")
	f.Add("k", "COMPLETED", int64(1767225600), int64(0), "", "t", bytes.Repeat([]byte{0xfe, 0x01, 0x77}, 300), false, "E", strings.Repeat("m", 600))

	f.Fuzz(func(t *testing.T, key, status string, exp, ipMs int64, hash, token string, response []byte, omitted bool, errType, errMsg string) {
		if checkKey(key) != nil {
			t.Skip()
		}
		rec := &persistence.Record{
			Key:             key,
			Status:          persistence.Status(status),
			ExpiresAt:       time.Unix(exp, 0),
			PayloadHash:     hash,
			Token:           token,
			Response:        response,
			ResponseOmitted: omitted,
			ErrorType:       errType,
			ErrorMessage:    errMsg,
		}
		if ipMs != 0 {
			rec.InProgressExpiresAt = time.UnixMilli(ipMs)
		}
		plain, sortKey, small := testStores(t)

		for _, s := range []*Store{plain, sortKey} {
			v := s.encode(rec)
			item := s.item(rec.Key, &v)
			checkTransportable(t, item)
			got, err := s.decode(item)
			if err != nil {
				t.Fatalf("decode(encode(%+v)): %v", rec, err)
			}
			if diff := recordtest.Diff(got, rec); diff != "" {
				t.Fatalf("Put item round trip:\n%s", diff)
			}
			got = fromUpdate(t, s, rec)
			if diff := recordtest.Diff(got, rec); diff != "" {
				t.Fatalf("Update round trip:\n%s", diff)
			}
		}

		// With a small item size limit, Update either keeps the response or
		// omits it, and the item fits.
		in, err := small.updateInput(rec)
		got := fromUpdate(t, small, rec)
		if err != nil {
			if !errors.Is(err, persistence.ErrResponseOmitted) {
				t.Fatalf("updateInput: %v", err)
			}
			want := *rec
			want.Response, want.ResponseOmitted = nil, true
			if diff := recordtest.Diff(got, &want); diff != "" {
				t.Fatalf("omitted response round trip:\n%s", diff)
			}
		} else if diff := recordtest.Diff(got, rec); diff != "" {
			t.Fatalf("Update round trip with a small limit:\n%s", diff)
		}
		if _, hasData := in.ExpressionAttributeValues[":d"]; hasData {
			v := small.encode(rec)
			_ = small.fit(&v, rec.Key, rec.Response)
			if size := small.itemSize(rec.Key, &v); size > small.opts.MaxItemSize {
				t.Fatalf("item of %d bytes kept its response, over the limit of %d", size, small.opts.MaxItemSize)
			}
		}
	})
}

var placeholderRE = regexp.MustCompile(`[#:][a-z_]+`)

// fromUpdate applies the UpdateItem request for rec, as DynamoDB would
// (SET and REMOVE of the placeholders), to the item of rec's reservation
// (the record the update's token condition finds: rec's key, token and
// payload hash, in progress until a deadline), after checking that the
// expressions and the placeholder maps agree exactly (DynamoDB rejects
// unused names and values), and decodes the result.
func fromUpdate(t *testing.T, s *Store, rec *persistence.Record) *persistence.Record {
	t.Helper()
	in, _ := s.updateInput(rec)
	used := placeholderRE.FindAllString(*in.UpdateExpression+" "+*in.ConditionExpression, -1)
	for name := range in.ExpressionAttributeNames {
		if !slices.Contains(used, name) {
			t.Fatalf("name %s unused in %q", name, *in.UpdateExpression)
		}
	}
	for value := range in.ExpressionAttributeValues {
		if !slices.Contains(used, value) {
			t.Fatalf("value %s unused in %q", value, *in.UpdateExpression)
		}
	}
	for _, p := range used {
		_, okName := in.ExpressionAttributeNames[p]
		_, okValue := in.ExpressionAttributeValues[p]
		if !okName && !okValue {
			t.Fatalf("placeholder %s of %q has no name or value", p, *in.UpdateExpression)
		}
	}

	reservation := &persistence.Record{Key: rec.Key, Status: persistence.StatusInProgress, ExpiresAt: rec.ExpiresAt.Add(-time.Minute),
		InProgressExpiresAt: time.UnixMilli(1_700_000_000_000), PayloadHash: rec.PayloadHash, Token: rec.Token}
	v := s.encode(reservation)
	item := s.item(rec.Key, &v)
	for k, v := range in.Key {
		if !reflect.DeepEqual(item[k], v) {
			t.Fatalf("key attribute %q: update %v, reservation %v", k, v, item[k])
		}
	}
	set, remove, _ := strings.Cut(strings.TrimPrefix(*in.UpdateExpression, "SET "), " REMOVE ")
	for _, assign := range strings.Split(set, ", ") {
		name, value, ok := strings.Cut(assign, " = ")
		if !ok {
			t.Fatalf("malformed SET clause %q", assign)
		}
		item[in.ExpressionAttributeNames[name]] = in.ExpressionAttributeValues[value]
	}
	for _, name := range strings.Split(remove, ", ") {
		if name != "" {
			delete(item, in.ExpressionAttributeNames[name])
		}
	}
	checkTransportable(t, item)
	got, err := s.decode(item)
	if err != nil {
		t.Fatalf("decode of the updated item: %v", err)
	}
	return got
}

func checkTransportable(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	for name, av := range item {
		if s, ok := av.(*types.AttributeValueMemberS); ok && !utf8.ValidString(s.Value) {
			t.Fatalf("attribute %q is a string that is not valid UTF-8: %q", name, s.Value)
		}
		if av == nil {
			t.Fatalf("attribute %q has a nil value", name)
		}
	}
}

// FuzzLiveCondition checks that the values the reservation condition
// compares with (the current time rounded up to the second and to the
// millisecond) make "stored < now" agree with persistence.Record.Live for
// every stored time and every current time.
func FuzzLiveCondition(f *testing.F) {
	f.Add(int64(1767225600_000000000), int64(1767225600), int64(1767225600_000))
	f.Add(int64(1767225600_000000001), int64(1767225600), int64(1767225600_000))
	f.Add(int64(1767225599_999999999), int64(1767225600), int64(1767225599_999))
	f.Add(int64(-1), int64(-1), int64(-1))
	f.Add(int64(-1_500_000_000), int64(-2), int64(-1500))
	f.Fuzz(func(t *testing.T, nowNanos, expSec, ipMs int64) {
		now := time.Unix(0, nowNanos)
		rec := persistence.Record{Status: persistence.StatusInProgress, ExpiresAt: time.Unix(expSec, 0), InProgressExpiresAt: time.UnixMilli(ipMs)}
		if rec.InProgressExpiresAt.IsZero() {
			t.Skip()
		}
		condition := expSec < epoch.CeilSeconds(now) || ipMs < epoch.CeilMillis(now)
		if condition == rec.Live(now) {
			t.Fatalf("at %v (%d ns): condition says takeover=%v, Live says live=%v (expires %d s, in progress until %d ms)",
				now, nowNanos, condition, rec.Live(now), expSec, ipMs)
		}
	})
}

// The pooled gzip writers must not carry state from one response to the
// next.
func TestCompressionIsIndependentPerCall(t *testing.T) {
	s, _, _ := testStores(t)
	a := bytes.Repeat([]byte("a"), 1000)
	b := bytes.Repeat([]byte("b"), 1000)
	for range 3 {
		for _, resp := range [][]byte{a, b} {
			rec := &persistence.Record{Key: "k", Response: resp}
			v := s.encode(rec)
			if v[attrDataEncoding] == nil {
				t.Fatal("not compressed")
			}
			got, err := s.decode(s.item("k", &v))
			if err != nil || !bytes.Equal(got.Response, resp) {
				t.Fatalf("round trip: %v", err)
			}
		}
	}
}

func TestDecodeRejectsMalformedItems(t *testing.T) {
	s, _, _ := testStores(t)
	valid := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"id":          &types.AttributeValueMemberS{Value: "k"},
			"expiration":  &types.AttributeValueMemberN{Value: "1767225600"},
			"status":      &types.AttributeValueMemberS{Value: "COMPLETED"},
			"owner_token": &types.AttributeValueMemberS{Value: "t"},
		}
	}
	if _, err := s.decode(valid()); err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(map[string]types.AttributeValue){
		"no key":            func(m map[string]types.AttributeValue) { delete(m, "id") },
		"numeric key":       func(m map[string]types.AttributeValue) { m["id"] = &types.AttributeValueMemberN{Value: "1"} },
		"string expiry":     func(m map[string]types.AttributeValue) { m["expiration"] = &types.AttributeValueMemberS{Value: "1"} },
		"fractional expiry": func(m map[string]types.AttributeValue) { m["expiration"] = &types.AttributeValueMemberN{Value: "1.5"} },
		"list status":       func(m map[string]types.AttributeValue) { m["status"] = &types.AttributeValueMemberL{} },
		"string omitted": func(m map[string]types.AttributeValue) {
			m["response_omitted"] = &types.AttributeValueMemberS{Value: "true"}
		},
		"unknown encoding": func(m map[string]types.AttributeValue) {
			m["data"] = &types.AttributeValueMemberB{Value: []byte("x")}
			m["data_encoding"] = &types.AttributeValueMemberS{Value: "br"}
		},
		"encoded string": func(m map[string]types.AttributeValue) {
			m["data"] = &types.AttributeValueMemberS{Value: "x"}
			m["data_encoding"] = &types.AttributeValueMemberS{Value: "gzip"}
		},
		"corrupt gzip": func(m map[string]types.AttributeValue) {
			m["data"] = &types.AttributeValueMemberB{Value: []byte("x")}
			m["data_encoding"] = &types.AttributeValueMemberS{Value: "gzip"}
		},
		"numeric data": func(m map[string]types.AttributeValue) { m["data"] = &types.AttributeValueMemberN{Value: "1"} },
		"in-progress string": func(m map[string]types.AttributeValue) {
			m["in_progress_expiration"] = &types.AttributeValueMemberS{Value: "1"}
		},
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			item := valid()
			mutate(item)
			if rec, err := s.decode(item); err == nil {
				t.Fatalf("decoded %+v", rec)
			}
		})
	}
	// A number in exponent notation that is an integer is accepted.
	item := valid()
	item["expiration"] = &types.AttributeValueMemberN{Value: "1.7672256E9"}
	rec, err := s.decode(item)
	if err != nil || rec.ExpiresAt.Unix() != 1767225600 {
		t.Fatalf("got %v, %v", rec, err)
	}
}

// An InProgressExpiresAt that is not a whole millisecond is rounded up,
// never down: a reservation must not lapse before the deadline it was given.
func TestInProgressExpiryRoundsUp(t *testing.T) {
	s, _, _ := testStores(t)
	base := time.Unix(1767225600, 0)
	rec := &persistence.Record{
		Key:                 "k",
		Status:              persistence.StatusInProgress,
		ExpiresAt:           base.Add(time.Hour),
		InProgressExpiresAt: base.Add(1500*time.Microsecond + time.Nanosecond),
	}
	v := s.encode(rec)
	got, err := s.decode(s.item("k", &v))
	if err != nil {
		t.Fatal(err)
	}
	if want := base.Add(2 * time.Millisecond); !got.InProgressExpiresAt.Equal(want) {
		t.Errorf("InProgressExpiresAt %v stored as %v, want %v", rec.InProgressExpiresAt, got.InProgressExpiresAt, want)
	}
	if !got.Live(rec.InProgressExpiresAt) {
		t.Error("the stored reservation lapses before the given deadline")
	}
}

// attrValueSize counts what DynamoDB counts for a value of each kind.
func TestAttrValueSize(t *testing.T) {
	for name, tc := range map[string]struct {
		v    types.AttributeValue
		want int
	}{
		"string":     {&types.AttributeValueMemberS{Value: "héllo"}, 6},
		"binary":     {&types.AttributeValueMemberB{Value: []byte{1, 2, 3}}, 3},
		"number":     {&types.AttributeValueMemberN{Value: "12345"}, numberSize("12345")},
		"bool":       {&types.AttributeValueMemberBOOL{Value: true}, 1},
		"null":       {&types.AttributeValueMemberNULL{Value: true}, 1},
		"string set": {&types.AttributeValueMemberSS{Value: []string{"ab", "c"}}, 3},
		"number set": {&types.AttributeValueMemberNS{Value: []string{"1", "22"}}, numberSize("1") + numberSize("22")},
		"binary set": {&types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}, 3},
		"list": {&types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "ab"}, &types.AttributeValueMemberBOOL{},
		}}, 3 + (1 + 2) + (1 + 1)},
		"map": {&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"k": &types.AttributeValueMemberS{Value: "ab"},
		}}, 3 + 1 + (1 + 2)},
	} {
		if got := attrValueSize(tc.v); got != tc.want {
			t.Errorf("%s: attrValueSize = %d, want %d", name, got, tc.want)
		}
	}
}
