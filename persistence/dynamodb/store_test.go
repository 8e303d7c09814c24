package dynamodb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

func TestConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		storetest.Run(t, func(*testing.T) persistence.Store { return store })
	})
}

func TestConformanceSortKey(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		opts := func(o *dynamodb.Options) {
			o.KeyAttr = "pk"
			o.SortKeyAttr = "sk"
			o.StaticPKValue = "idempotency#conformance"
		}
		_, store, _ := srv.setup(t, opts)
		storetest.Run(t, func(*testing.T) persistence.Store { return store })
	})
}

// TestConformanceAllOld runs the suite against a client that returns the
// existing item on a failed condition, as DynamoDB does, so that every
// conflict carries ConflictError.Existing and the suite checks it: on
// dynalite, which does not, through an allOldClient.
func TestConformanceAllOld(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		if srv.ReturnsOldItem {
			t.Skip("the server returns the existing item itself: TestConformance ran with it")
		}
		name, _, _ := srv.setup(t)
		store := newStore(t, srv.withAllOld(srv.NewClient()), name)
		storetest.Run(t, func(*testing.T) persistence.Store { return store })
	})
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	client := awsdynamodb.New(awsdynamodb.Options{Region: "us-east-1"})
	tests := []struct {
		name   string
		client dynamodb.Client
		table  string
		opt    func(*dynamodb.Options)
		want   string
	}{
		{"nil client", nil, "table", nil, "nil client"},
		{"empty table", client, "", nil, "shorter than 3"},
		{"short table", client, "ab", nil, "shorter than 3"},
		{"key equals sort key", client, "table", func(o *dynamodb.Options) { o.SortKeyAttr = "id" }, `KeyAttr and Options.SortKeyAttr are both "id"`},
		{"data equals status", client, "table", func(o *dynamodb.Options) { o.DataAttr = "status" }, `StatusAttr and Options.DataAttr are both "status"`},
		{"token equals expiry", client, "table", func(o *dynamodb.Options) { o.TokenAttr = "expiration" }, "both"},
		{"static pk without sort key", client, "table", func(o *dynamodb.Options) { o.StaticPKValue = "x" }, "needs a sort key"},
		{"item size above limit", client, "table", func(o *dynamodb.Options) { o.MaxItemSize = 400<<10 + 1 }, "MaxItemSize"},
		{"negative item size", client, "table", func(o *dynamodb.Options) { o.MaxItemSize = -1 }, "MaxItemSize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []func(*dynamodb.Options)
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			s, err := dynamodb.New(tt.client, tt.table, opts...)
			require.ErrorContains(t, err, tt.want)
			require.Nil(t, s)
			if tt.client != nil && tt.table != "" && len(tt.table) >= 3 {
				// CreateTable validates the same options.
				require.ErrorContains(t, dynamodb.CreateTable(t.Context(), client, tt.table, opts...), tt.want)
			}
		})
	}
}

// TestItemLayout checks the stored item attribute by attribute: Powertools'
// names and types for the shared attributes, ours for the rest.
func TestItemLayout(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, store, _ := srv.setup(t)
		now := wholeSecond()
		rec := inProgress(now)
		rec.InProgressExpiresAt = now.Add(1500 * time.Millisecond)
		require.NoError(t, store.Put(t.Context(), rec, now))

		item := srv.rawItem(t, name, idKey(rec.Key))
		require.Equal(t, map[string]types.AttributeValue{
			"id":                     &types.AttributeValueMemberS{Value: rec.Key},
			"expiration":             &types.AttributeValueMemberN{Value: fmt.Sprint(now.Unix() + 3600)},
			"in_progress_expiration": &types.AttributeValueMemberN{Value: fmt.Sprint(now.UnixMilli() + 1500)},
			"status":                 &types.AttributeValueMemberS{Value: "INPROGRESS"},
			"validation":             &types.AttributeValueMemberS{Value: rec.PayloadHash},
			"owner_token":            &types.AttributeValueMemberS{Value: rec.Token},
		}, item)

		done := completed(rec, []byte(`{"statusCode":200,"body":"ok"}`))
		done.InProgressExpiresAt = time.Time{}
		in, _ := store.UpdateInput(done)
		require.Equal(t, "SET #e = :e, #s = :s, #d = :d REMOVE #i, #h", *in.UpdateExpression,
			"the completion writes what changes, and removes the in-progress expiry and the hold")
		require.Len(t, in.ExpressionAttributeNames, 6, "#token of the condition, and the five of the expression")
		require.NoError(t, store.Update(t.Context(), done))
		item = srv.rawItem(t, name, idKey(rec.Key))
		require.Equal(t, map[string]types.AttributeValue{
			"id":          &types.AttributeValueMemberS{Value: rec.Key},
			"expiration":  &types.AttributeValueMemberN{Value: fmt.Sprint(now.Unix() + 3600)},
			"status":      &types.AttributeValueMemberS{Value: "COMPLETED"},
			"data":        &types.AttributeValueMemberS{Value: `{"statusCode":200,"body":"ok"}`},
			"validation":  &types.AttributeValueMemberS{Value: rec.PayloadHash},
			"owner_token": &types.AttributeValueMemberS{Value: rec.Token},
		}, item, "the completion of the reservation: the token and payload hash as the reservation wrote them")

		other := inProgress(now)
		require.NoError(t, store.Put(t.Context(), other, now))
		failed := completed(other, nil)
		failed.InProgressExpiresAt = time.Time{}
		failed.ErrorType = "CardDeclinedError"
		failed.ErrorMessage = "declined"
		require.NoError(t, store.Update(t.Context(), failed))
		item = srv.rawItem(t, name, idKey(other.Key))
		require.NotContains(t, item, "data")
		require.NotContains(t, item, "in_progress_expiration")
		require.Equal(t, &types.AttributeValueMemberS{Value: "CardDeclinedError"}, item["error_type"])
		require.Equal(t, &types.AttributeValueMemberS{Value: "declined"}, item["error_message"])
	})
}

func TestSortKeyDefaultsToFunctionName(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-api")
		opts := func(o *dynamodb.Options) { o.SortKeyAttr = "sk" }
		name, store, _ := srv.setup(t, opts)
		now := wholeSecond()
		rec := inProgress(now)
		require.NoError(t, store.Put(t.Context(), rec, now))
		item := srv.rawItem(t, name, map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: "idempotency#orders-api"},
			"sk": &types.AttributeValueMemberS{Value: rec.Key},
		})
		require.NotEmpty(t, item)
		require.Equal(t, &types.AttributeValueMemberS{Value: rec.Token}, item["owner_token"])
	})
}

// TestRequestCounts counts the requests each store method sends.
func TestRequestCounts(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, store, counter := srv.setup(t)
		now := wholeSecond()
		rec := inProgress(now)

		require.NoError(t, store.Put(t.Context(), rec, now))
		require.Equal(t, 1, counter.Calls(), counter.String())
		require.Equal(t, 1, counter.Calls("PutItem"))

		counter.Reset()
		require.NoError(t, store.Update(t.Context(), completed(rec, []byte(`"done"`))))
		require.Equal(t, 1, counter.Calls("UpdateItem"), counter.String())
		require.Equal(t, 1, counter.Calls())

		// The replay path. On a server that returns the existing item with
		// the failed condition (DynamoDB Local, as DynamoDB): the PutItem
		// alone, and the conflict carries the record.
		counter.Reset()
		retry := inProgress(now)
		retry.Key = rec.Key
		err := store.Put(t.Context(), retry, now)
		var conflict *persistence.ConflictError
		require.ErrorAs(t, err, &conflict)
		if srv.ReturnsOldItem {
			require.NotNil(t, conflict.Existing, "the record from the failed condition")
			require.Empty(t, recordtest.Diff(conflict.Existing, completed(rec, []byte(`"done"`))))
			require.Equal(t, 1, counter.Calls(), counter.String())
		} else {
			// On dynalite, which ignores ALL_OLD, the conflict does not carry
			// the record, so it takes a Get: 2 requests.
			require.Nil(t, conflict.Existing, "dynalite ignores ALL_OLD")
			got, err := store.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, completed(rec, []byte(`"done"`))))
			require.Equal(t, 2, counter.Calls(), counter.String())
			require.Equal(t, 1, counter.Calls("GetItem"))

			// Against a client that emulates DynamoDB's ALL_OLD: 1 request,
			// and the conflict carries the record.
			allOld := &dynalite.Counter{}
			store2 := newStore(t, srv.withAllOld(srv.NewClient(allOld.Register)), name)
			err = store2.Put(t.Context(), retry, now)
			require.ErrorAs(t, err, &conflict)
			require.NotNil(t, conflict.Existing)
			require.Empty(t, recordtest.Diff(conflict.Existing, completed(rec, []byte(`"done"`))))
			require.Equal(t, 1, allOld.Calls(), allOld.String())
		}

		// Release: 1 DeleteItem.
		counter.Reset()
		other := inProgress(now)
		require.NoError(t, store.Put(t.Context(), other, now))
		require.NoError(t, store.Delete(t.Context(), other.Key, other.Token))
		require.Equal(t, 1, counter.Calls("PutItem"), counter.String())
		require.Equal(t, 1, counter.Calls("DeleteItem"))
		require.Equal(t, 2, counter.Calls())
		require.Equal(t, counter.Calls(), counter.Attempts(), "no retries")
	})
}

// TestLiveAgreesWithRecord checks the reservation condition against
// persistence.Record.Live at the exact boundaries, with times that are not
// whole seconds: the server must decide as Live does.
func TestLiveAgreesWithRecord(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		base := wholeSecond()
		check := func(t *testing.T, held *persistence.Record, at time.Time) {
			t.Helper()
			err := store.Put(t.Context(), &persistence.Record{
				Key: held.Key, Status: persistence.StatusInProgress, ExpiresAt: at.Add(time.Hour).Truncate(time.Second), Token: "next",
			}, at)
			if held.Live(at) {
				require.ErrorIs(t, err, persistence.ErrConflict, "record live at %v (expires %v, in progress until %v)", at, held.ExpiresAt, held.InProgressExpiresAt)
			} else {
				require.NoError(t, err, "record not live at %v (expires %v, in progress until %v)", at, held.ExpiresAt, held.InProgressExpiresAt)
			}
		}
		offsets := []time.Duration{-time.Second, -time.Millisecond, -time.Nanosecond, 0, time.Nanosecond, time.Millisecond - time.Nanosecond, time.Millisecond, 999 * time.Millisecond, time.Second}

		t.Run("ExpiresAt", func(t *testing.T) {
			for _, off := range offsets {
				rec := completed(inProgress(base), []byte("1"))
				rec.ExpiresAt = base.Add(10 * time.Second)
				require.NoError(t, store.Put(t.Context(), rec, base))
				check(t, rec, rec.ExpiresAt.Add(off))
			}
		})
		t.Run("InProgressExpiresAt", func(t *testing.T) {
			for _, off := range offsets {
				rec := inProgress(base)
				rec.InProgressExpiresAt = base.Add(2*time.Second + 345*time.Millisecond)
				require.NoError(t, store.Put(t.Context(), rec, base))
				check(t, rec, rec.InProgressExpiresAt.Add(off))
			}
		})
		t.Run("NoInProgressExpiry", func(t *testing.T) {
			rec := inProgress(base)
			rec.InProgressExpiresAt = time.Time{}
			require.NoError(t, store.Put(t.Context(), rec, base))
			check(t, rec, base.Add(59*time.Minute))
		})
	})
}

// TestResponseSizes covers how responses are stored: as a string while
// small and valid UTF-8, compressed above the threshold, and omitted when
// even compressed they do not fit.
func TestResponseSizes(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, store, _ := srv.setup(t)
		now := wholeSecond()

		roundTrip := func(t *testing.T, store *dynamodb.Store, response []byte) (*persistence.Record, map[string]types.AttributeValue) {
			t.Helper()
			rec := inProgress(now)
			require.NoError(t, store.Put(t.Context(), rec, now))
			done := completed(rec, response)
			require.NoError(t, store.Update(t.Context(), done))
			got, err := store.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, done))
			return done, srv.rawItem(t, name, idKey(rec.Key))
		}

		t.Run("SmallTextIsAString", func(t *testing.T) {
			// Readable in the console while the item fits in a write unit.
			response := bytes.Repeat([]byte("é"), dynamodb.WriteUnit/4)
			_, item := roundTrip(t, store, response)
			require.IsType(t, &types.AttributeValueMemberS{}, item["data"])
			require.NotContains(t, item, "data_encoding")
			require.LessOrEqual(t, dynamodb.ItemSize(item), dynamodb.WriteUnit)
		})
		t.Run("TextOverAWriteUnitIsCompressed", func(t *testing.T) {
			response := jsonResponse(2 * dynamodb.WriteUnit)
			_, item := roundTrip(t, store, response)
			require.Equal(t, &types.AttributeValueMemberS{Value: "gzip"}, item["data_encoding"])
			require.LessOrEqual(t, dynamodb.ItemSize(item), dynamodb.WriteUnit)
		})
		t.Run("IncompressibleOverAWriteUnitIsAsIs", func(t *testing.T) {
			response := randomBytes(2 * dynamodb.WriteUnit)
			_, item := roundTrip(t, store, response)
			require.Equal(t, &types.AttributeValueMemberB{Value: response}, item["data"])
			require.NotContains(t, item, "data_encoding")
		})
		t.Run("SmallBinaryIsBinary", func(t *testing.T) {
			_, item := roundTrip(t, store, []byte{0xff, 0xfe, 0x00, 'x'})
			require.Equal(t, &types.AttributeValueMemberB{Value: []byte{0xff, 0xfe, 0x00, 'x'}}, item["data"])
			require.NotContains(t, item, "data_encoding")
		})
		t.Run("LargeTextIsCompressed", func(t *testing.T) {
			response := jsonResponse(300 << 10)
			_, item := roundTrip(t, store, response)
			data, ok := item["data"].(*types.AttributeValueMemberB)
			require.True(t, ok, "data is %T", item["data"])
			require.Less(t, len(data.Value), len(response)/2)
			require.Equal(t, &types.AttributeValueMemberS{Value: "gzip"}, item["data_encoding"])
		})
		t.Run("LargerThanAnItemButCompressible", func(t *testing.T) {
			// 1 MB that compresses under 400 KB is stored, and replayed whole.
			response := jsonResponse(1 << 20)
			_, item := roundTrip(t, store, response)
			require.Equal(t, &types.AttributeValueMemberS{Value: "gzip"}, item["data_encoding"])
		})
		t.Run("IncompressibleUpToTheLimit", func(t *testing.T) {
			// The largest response that fits: the item is exactly 400 KB as
			// DynamoDB counts it, and the server accepts it.
			rec := inProgress(now)
			rec.InProgressExpiresAt = time.Time{}
			rec.PayloadHash = ""
			// An expiry without zero digits, whose size is exactly 2 bytes plus
			// 1 per 2 digits.
			exp := now.Unix() + 3600
			for strings.Contains(fmt.Sprint(exp), "0") {
				exp++
			}
			rec.ExpiresAt = time.Unix(exp, 0)
			fixed := len("id") + len(rec.Key) +
				len("expiration") + 2 + (len(fmt.Sprint(exp))+1)/2 +
				len("status") + len("COMPLETED") +
				len("owner_token") + len(rec.Token) +
				len("data")
			response := randomBytes(dynamodb.MaxItemSize - fixed)
			require.NoError(t, store.Put(t.Context(), rec, now))
			done := completed(rec, response)
			require.NoError(t, store.Update(t.Context(), done), "an item of exactly 400 KB fits")
			got, err := store.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, done))

			// One byte more does not.
			rec2 := *rec
			rec2.Key = rec.Key[:len(rec.Key)-1] + "-"
			require.NoError(t, store.Put(t.Context(), &rec2, now))
			over := completed(&rec2, append(response, 0))
			require.ErrorIs(t, store.Update(t.Context(), over), persistence.ErrResponseOmitted)
		})
		t.Run("TooLargeIsOmitted", func(t *testing.T) {
			rec := inProgress(now)
			require.NoError(t, store.Put(t.Context(), rec, now))
			done := completed(rec, randomBytes(600<<10))
			err := store.Update(t.Context(), done)
			require.ErrorIs(t, err, persistence.ErrResponseOmitted)
			require.NotErrorIs(t, err, persistence.ErrFenced)
			require.ErrorContains(t, err, "614400 bytes")

			want := *done
			want.Response = nil
			want.ResponseOmitted = true
			got, err := store.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, &want))
			require.Equal(t, persistence.StatusCompleted, got.Status)

			item := srv.rawItem(t, name, idKey(rec.Key))
			require.NotContains(t, item, "data")
			require.NotContains(t, item, "data_encoding")
			require.Equal(t, &types.AttributeValueMemberBOOL{Value: true}, item["response_omitted"])

			// The key stays completed: a retry conflicts instead of running the
			// side effect again, and sees that the response was omitted.
			var conflict *persistence.ConflictError
			retry := inProgress(now)
			retry.Key = rec.Key
			err = newStore(t, srv.withAllOld(srv.NewClient()), name).Put(t.Context(), retry, now)
			require.ErrorAs(t, err, &conflict)
			require.True(t, conflict.Existing.ResponseOmitted)
			require.Empty(t, conflict.Existing.Response)

			// Repeating the Update (a lost reply) gives the same answer.
			require.ErrorIs(t, store.Update(t.Context(), done), persistence.ErrResponseOmitted)
		})
		t.Run("MaxItemSizeOption", func(t *testing.T) {
			small := newStore(t, srv.NewClient(), name, func(o *dynamodb.Options) {
				o.MaxItemSize = 4096
				o.CompressAbove = -1
			})
			rec := inProgress(now)
			require.NoError(t, small.Put(t.Context(), rec, now))
			require.NoError(t, small.Update(t.Context(), completed(rec, bytes.Repeat([]byte("a"), 3000))))
			item := srv.rawItem(t, name, idKey(rec.Key))
			require.IsType(t, &types.AttributeValueMemberS{}, item["data"], "compression is off")

			// 5000 bytes do not fit in 4096; compressed they would, but
			// compression is off.
			require.ErrorIs(t, small.Update(t.Context(), completed(rec, bytes.Repeat([]byte("a"), 5000))), persistence.ErrResponseOmitted)
			// With compression on, they fit.
			compressing := newStore(t, srv.NewClient(), name, func(o *dynamodb.Options) { o.MaxItemSize = 4096 })
			require.NoError(t, compressing.Update(t.Context(), completed(rec, bytes.Repeat([]byte("a"), 5000))))
		})
	})
}

// jsonResponse returns about n bytes of JSON that compresses well, as
// typical API responses do.
func jsonResponse(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"n":%d,"sku":"SKU-%06d","name":"Widget – größe %d","price":{"amount":%d,"currency":"EUR"}}`, i, i*7, i%13, 1000+i%500)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestLostReplies drops the reply to a write after the server has applied
// it, so that the SDK retries the write.
func TestLostReplies(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, _, _ := srv.setup(t)
		now := wholeSecond()
		newFaultyStore := func(t *testing.T, allOld bool) (*dynamodb.Store, *dynalite.Faults, *dynalite.Counter) {
			faults := &dynalite.Faults{}
			counter := &dynalite.Counter{}
			var client dynamodb.Client = srv.NewClient(faults.Register, counter.Register)
			if allOld {
				client = srv.withAllOld(client)
			}
			return newStore(t, client, name), faults, counter
		}

		for _, allOld := range srv.allOldModes() {
			t.Run(fmt.Sprintf("PutItem/allOld=%v", allOld), func(t *testing.T) {
				store, faults, counter := newFaultyStore(t, allOld)
				rec := inProgress(now)
				faults.LoseReply("PutItem", 1)
				err := store.Put(t.Context(), rec, now)

				// The first attempt wrote the record; the retry finds it live
				// and conflicts, with the record carrying our own token, which
				// is how the caller recognises its own reservation.
				require.Equal(t, 1, faults.Fired(dynalite.LostReply))
				require.Equal(t, 1, counter.Calls("PutItem"))
				require.Equal(t, 2, counter.Attempts("PutItem"))
				var conflict *persistence.ConflictError
				require.ErrorAs(t, err, &conflict)
				existing := conflict.Existing
				if allOld {
					require.NotNil(t, existing)
				} else {
					require.Nil(t, existing)
					existing, err = store.Get(t.Context(), rec.Key)
					require.NoError(t, err)
				}
				require.Equal(t, rec.Token, existing.Token)
				require.Empty(t, recordtest.Diff(existing, rec))
			})
		}

		t.Run("UpdateItem", func(t *testing.T) {
			store, faults, counter := newFaultyStore(t, false)
			rec := inProgress(now)
			require.NoError(t, store.Put(t.Context(), rec, now))
			faults.LoseReply("UpdateItem", 1)
			done := completed(rec, []byte(`{"id":"p_1"}`))
			require.NoError(t, store.Update(t.Context(), done), "a repeated Update succeeds")
			require.Equal(t, 1, faults.Fired(dynalite.LostReply))
			require.Equal(t, 2, counter.Attempts("UpdateItem"))
			got, err := store.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, done))
		})

		t.Run("DeleteItem", func(t *testing.T) {
			store, faults, counter := newFaultyStore(t, false)
			rec := inProgress(now)
			require.NoError(t, store.Put(t.Context(), rec, now))
			faults.LoseReply("DeleteItem", 1)
			require.NoError(t, store.Delete(t.Context(), rec.Key, rec.Token), "a repeated Delete succeeds")
			require.Equal(t, 2, counter.Attempts("DeleteItem"))
			_, err := store.Get(t.Context(), rec.Key)
			require.ErrorIs(t, err, persistence.ErrNotFound)
		})
	})
}

// requireServiceError checks that err is a failure of the service, not one
// of the outcomes the contract gives meaning to.
func requireServiceError(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.NotErrorIs(t, err, persistence.ErrConflict)
	require.NotErrorIs(t, err, persistence.ErrFenced)
	require.NotErrorIs(t, err, persistence.ErrNotFound)
	require.NotErrorIs(t, err, persistence.ErrResponseOmitted)
	require.True(t, strings.HasPrefix(err.Error(), "persistence/dynamodb: "), "error %q", err)
}

// TestServiceFailures: throttling, a server that is down and a table that
// does not exist surface as errors of their own, never as conflicts or
// fencing, and leave nothing behind.
func TestServiceFailures(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		now := wholeSecond()

		for _, kind := range []dynalite.FaultKind{dynalite.Throttled, dynalite.Refused} {
			t.Run(kind.String(), func(t *testing.T) {
				faults := &dynalite.Faults{}
				counter := &dynalite.Counter{}
				store := newStore(t, srv.NewClient(faults.Register, counter.Register), name)
				faults.Add("", kind, -1)

				rec := inProgress(now)
				err := store.Put(t.Context(), rec, now)
				requireServiceError(t, err)
				if kind == dynalite.Throttled {
					var throttled *types.ProvisionedThroughputExceededException
					require.ErrorAs(t, err, &throttled)
				} else {
					require.ErrorIs(t, err, dynalite.ErrInjected)
				}
				require.Equal(t, 1, counter.Calls("PutItem"))
				require.Equal(t, 3, counter.Attempts("PutItem"), "the SDK retried")
				_, err = healthy.Get(t.Context(), rec.Key)
				require.ErrorIs(t, err, persistence.ErrNotFound, "nothing was written")

				_, err = store.Get(t.Context(), rec.Key)
				requireServiceError(t, err)

				// Update and Delete of a record that exists: errors, not
				// fencing, and the record is unchanged.
				require.NoError(t, healthy.Put(t.Context(), rec, now))
				requireServiceError(t, store.Update(t.Context(), completed(rec, []byte("1"))))
				requireServiceError(t, store.Delete(t.Context(), rec.Key, rec.Token))
				got, err := healthy.Get(t.Context(), rec.Key)
				require.NoError(t, err)
				require.Empty(t, recordtest.Diff(got, rec))

				// Once the fault is gone, the same store works.
				faults.Clear()
				require.NoError(t, store.Update(t.Context(), completed(rec, []byte("1"))))
			})
		}

		t.Run("ServerDown", func(t *testing.T) {
			client := closedClient(t)
			store := newStore(t, client, name)
			rec := inProgress(now)
			err := store.Put(t.Context(), rec, now)
			requireServiceError(t, err)
			require.ErrorContains(t, err, "connection refused")
			requireServiceError(t, store.Update(t.Context(), completed(rec, nil)))
			requireServiceError(t, store.Delete(t.Context(), rec.Key, rec.Token))
			_, err = store.Get(t.Context(), rec.Key)
			requireServiceError(t, err)
		})

		t.Run("MissingTable", func(t *testing.T) {
			store := newStore(t, srv.NewClient(), "no-such-table-"+strings.ToLower(rand.Text()))
			rec := inProgress(now)
			var missing *types.ResourceNotFoundException
			err := store.Put(t.Context(), rec, now)
			requireServiceError(t, err)
			require.ErrorAs(t, err, &missing)
			_, err = store.Get(t.Context(), rec.Key)
			requireServiceError(t, err)
			require.ErrorAs(t, err, &missing)
			requireServiceError(t, store.Update(t.Context(), completed(rec, nil)))
			requireServiceError(t, store.Delete(t.Context(), rec.Key, rec.Token))
		})

		t.Run("Cancelled", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			rec := inProgress(now)
			err := healthy.Put(ctx, rec, now)
			requireServiceError(t, err)
			require.ErrorIs(t, err, context.Canceled)
		})
	})
}

func TestInvalidKeys(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, counter := srv.setup(t)
		now := wholeSecond()
		for _, key := range []string{"", "bad\xffkey"} {
			rec := inProgress(now)
			rec.Key = key
			require.Error(t, store.Put(t.Context(), rec, now))
			_, err := store.Get(t.Context(), key)
			require.Error(t, err)
			require.NotErrorIs(t, err, persistence.ErrNotFound)
			require.Error(t, store.Update(t.Context(), rec))
			require.Error(t, store.Delete(t.Context(), key, rec.Token))
		}
		require.Zero(t, counter.Calls(), "rejected before sending: %s", counter)
	})
}

// TestNonUTF8Strings: strings that are not valid UTF-8 cannot be string
// attributes (the SDK's JSON encoding would change them); they are stored as
// binary and round-trip exactly, including the token the writes are fenced
// on.
func TestNonUTF8Strings(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		now := wholeSecond()
		rec := inProgress(now)
		rec.Token = "tok\xff\xfe"
		rec.PayloadHash = "\x80hash"
		require.NoError(t, store.Put(t.Context(), rec, now))
		done := completed(rec, nil)
		done.ErrorType = "T\xc3"
		done.ErrorMessage = "message \xff"
		require.NoError(t, store.Update(t.Context(), done))
		got, err := store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		require.Empty(t, recordtest.Diff(got, done))

		other := *done
		other.Token = "tok\xff\xff"
		require.ErrorIs(t, store.Update(t.Context(), &other), persistence.ErrFenced)
		require.ErrorIs(t, store.Delete(t.Context(), rec.Key, "tok\xef\xbf\xbd\xef\xbf\xbd"), persistence.ErrFenced)

		held := inProgress(now)
		held.Token = rec.Token
		require.NoError(t, store.Put(t.Context(), held, now))
		require.ErrorIs(t, store.Delete(t.Context(), held.Key, "tok\xef\xbf\xbd\xef\xbf\xbd"), persistence.ErrFenced)
		require.NoError(t, store.Delete(t.Context(), held.Key, held.Token))
	})
}

// TestReadsPowertoolsItems: an item written by Powertools (no token, data as
// a JSON string) decodes.
func TestReadsPowertoolsItems(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, store, _ := srv.setup(t)
		now := wholeSecond()
		key := "orders-api.handler#" + strings.ToLower(rand.Text())
		_, err := srv.NewClient().PutItem(t.Context(), &awsdynamodb.PutItemInput{
			TableName: &name,
			Item: map[string]types.AttributeValue{
				"id":         &types.AttributeValueMemberS{Value: key},
				"expiration": &types.AttributeValueMemberN{Value: fmt.Sprint(now.Unix() + 3600)},
				"status":     &types.AttributeValueMemberS{Value: "COMPLETED"},
				"data":       &types.AttributeValueMemberS{Value: `{"message":"ok"}`},
				"validation": &types.AttributeValueMemberS{Value: "abc"},
			},
		})
		require.NoError(t, err)
		got, err := store.Get(t.Context(), key)
		require.NoError(t, err)
		require.Empty(t, recordtest.Diff(got, &persistence.Record{
			Key: key, Status: persistence.StatusCompleted, ExpiresAt: now.Add(time.Hour),
			Response: []byte(`{"message":"ok"}`), PayloadHash: "abc",
		}))
	})
}

func TestCreateTable(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		admin := srv.NewClient()

		t.Run("SortKey", func(t *testing.T) {
			opts := func(o *dynamodb.Options) { o.KeyAttr = "pk"; o.SortKeyAttr = "sk" }
			name := srv.table(t, opts)
			out, err := admin.DescribeTable(t.Context(), &awsdynamodb.DescribeTableInput{TableName: &name})
			require.NoError(t, err)
			require.Equal(t, types.TableStatusActive, out.Table.TableStatus)
			require.Len(t, out.Table.KeySchema, 2)
			assert.Equal(t, "pk", *out.Table.KeySchema[0].AttributeName)
			assert.Equal(t, types.KeyTypeHash, out.Table.KeySchema[0].KeyType)
			assert.Equal(t, "sk", *out.Table.KeySchema[1].AttributeName)
			assert.Equal(t, types.KeyTypeRange, out.Table.KeySchema[1].KeyType)

			// Again: the table exists with the right schema.
			require.NoError(t, dynamodb.CreateTable(t.Context(), admin, name, opts))
			// With another schema: an error.
			err = dynamodb.CreateTable(t.Context(), admin, name)
			require.ErrorContains(t, err, "exists with key schema")
		})

		t.Run("Unreachable", func(t *testing.T) {
			client := closedClient(t)
			err := dynamodb.CreateTable(t.Context(), client, "some-table")
			require.Error(t, err)
			require.False(t, errors.Is(err, context.DeadlineExceeded))
		})
	})
}

// The store's conditions group their clauses by precedence (AND before
// OR), not with parentheses, which cost dynalite's parser about 0.35 ms a
// request: the only parentheses are those of function calls.
func TestConditionsWithoutParentheses(t *testing.T) {
	captured := &requestClient{}
	store := newStore(t, captured, "idempotency")
	now := time.Now()
	rec, done := benchRecords(now)
	renewal := *rec
	renewal.InProgressExpiresAt = now.Add(time.Minute)
	var conditions []string
	require.NoError(t, store.Put(t.Context(), rec, now))
	conditions = append(conditions, *captured.last.(*awsdynamodb.PutItemInput).ConditionExpression)
	for _, r := range []*persistence.Record{done, &renewal} {
		require.NoError(t, store.Update(t.Context(), r))
		conditions = append(conditions, *captured.last.(*awsdynamodb.UpdateItemInput).ConditionExpression)
	}
	require.NoError(t, store.Delete(t.Context(), rec.Key, rec.Token))
	conditions = append(conditions, *captured.last.(*awsdynamodb.DeleteItemInput).ConditionExpression)
	grouping := regexp.MustCompile(`(^|[^a-z_])\(`)
	for _, c := range conditions {
		require.NotRegexp(t, grouping, c)
	}
	require.Contains(t, conditions[0], " OR #s = :p AND ")
}
