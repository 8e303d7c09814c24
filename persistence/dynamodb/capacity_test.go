package dynamodb_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/testevents"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// meter is an SDK middleware that asks every request for its consumed
// capacity (ReturnConsumedCapacity TOTAL) and keeps the units of the last
// one that answered. A failed conditional write answers with an error,
// which carries no consumed capacity: its units are NaN.
type meter struct {
	mu    sync.Mutex
	op    string
	units float64
}

func (m *meter) register(o *awsdynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("retrysafe.MeterCapacity",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				switch p := in.Parameters.(type) {
				case *awsdynamodb.PutItemInput:
					p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
				case *awsdynamodb.UpdateItemInput:
					p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
				case *awsdynamodb.DeleteItemInput:
					p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
				case *awsdynamodb.GetItemInput:
					p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
				case *awsdynamodb.TransactWriteItemsInput:
					p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
				}
				out, md, err := next.HandleInitialize(ctx, in)
				var cc []types.ConsumedCapacity
				switch r := out.Result.(type) {
				case *awsdynamodb.PutItemOutput:
					cc = ptrs(r.ConsumedCapacity)
				case *awsdynamodb.UpdateItemOutput:
					cc = ptrs(r.ConsumedCapacity)
				case *awsdynamodb.DeleteItemOutput:
					cc = ptrs(r.ConsumedCapacity)
				case *awsdynamodb.GetItemOutput:
					cc = ptrs(r.ConsumedCapacity)
				case *awsdynamodb.TransactWriteItemsOutput:
					cc = r.ConsumedCapacity
				}
				units := math.NaN()
				if err == nil && len(cc) > 0 {
					units = 0
					for _, c := range cc {
						if c.TableName != nil && c.CapacityUnits != nil {
							units += *c.CapacityUnits
						}
					}
				}
				m.mu.Lock()
				m.op, m.units = awsmiddleware.GetOperationName(ctx), units
				m.mu.Unlock()
				return out, md, err
			}), middleware.After)
	})
}

func ptrs(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

// last returns the operation and units of the last request.
func (m *meter) last() (string, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.op, m.units
}

// Units by AWS's documented rules, for on-demand tables
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
// a write request unit per KB of the larger of the item before and after a
// write (a failed condition: of the existing item), a read request unit per
// 4 KB read strongly, twice as many in a transaction; at least one.
func writeUnits(bytes int) float64 { return max(1, math.Ceil(float64(bytes)/1024)) }
func readUnits(bytes int) float64  { return max(1, math.Ceil(float64(bytes)/4096)) }

// capacitySizes are the response sizes the capacity table reports.
var capacitySizes = []struct {
	name string
	size int
}{{"100 B", 100}, {"2 KB", 2 << 10}, {"8 KB", 8 << 10}, {"16 KB", 16 << 10}, {"300 KB", 300 << 10}}

// stepCommit is the step of a commit with a staged write.
const stepCommit = "commit, one staged write (TransactWriteItems)"

// capacityRow is the units one step of a call costs, by response size:
// as DynamoDB Local reports them (NaN when it reports none) and by the
// documented rules.
type capacityRow struct {
	step               string
	measured, expected []float64
}

// measureCapacity runs each step of a call, for each response size, on a
// fresh table of DynamoDB Local with a store of optFns, and returns the
// units of each step.
func measureCapacity(t *testing.T, srv server, optFns ...func(*dynamodb.Options)) []capacityRow {
	t.Helper()
	ctx := t.Context()
	name := srv.table(t, optFns...)
	var m meter
	store := newStore(t, srv.NewClient(m.register), name, optFns...)
	peek := srv.NewClient()
	counters := srv.counterTable(t)

	size := func(key string) int {
		consistent := true
		out, err := peek.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: &name, Key: idKey(key), ConsistentRead: &consistent})
		require.NoError(t, err)
		return dynamodb.ItemSize(out.Item)
	}
	steps := []string{"reserve (PutItem)", "complete (UpdateItem)", "replay by write (PutItem, condition fails)", "replay by read (GetItem, strong)",
		"record an error (UpdateItem)", "release (DeleteItem)", stepCommit}
	rows := make([]capacityRow, len(steps))
	for i, s := range steps {
		rows[i] = capacityRow{step: s, measured: make([]float64, len(capacitySizes)), expected: make([]float64, len(capacitySizes))}
	}
	record := func(row, col int, wantOp string, expected float64) {
		t.Helper()
		op, units := m.last()
		require.Equal(t, wantOp, op)
		rows[row].measured[col], rows[row].expected[col] = units, expected
	}
	for col, sz := range capacitySizes {
		response := testevents.OrdersResponse(sz.size)
		now := wholeSecond()

		rec := inProgress(now)
		require.NoError(t, store.Put(ctx, rec, now))
		reserved := size(rec.Key)
		record(0, col, "PutItem", writeUnits(reserved))

		done := completed(rec, response)
		done.InProgressExpiresAt = time.Time{}
		require.NoError(t, store.Update(ctx, done))
		stored := size(rec.Key)
		record(1, col, "UpdateItem", writeUnits(max(reserved, stored)))

		again := inProgress(now)
		again.Key = rec.Key
		require.ErrorIs(t, store.Put(ctx, again, now), persistence.ErrConflict)
		record(2, col, "PutItem", writeUnits(stored))

		_, err := store.Get(ctx, rec.Key)
		require.NoError(t, err)
		record(3, col, "GetItem", readUnits(stored))

		failing := inProgress(now)
		require.NoError(t, store.Put(ctx, failing, now))
		failedSize := size(failing.Key)
		recorded := completed(failing, nil)
		recorded.InProgressExpiresAt = time.Time{}
		recorded.ErrorType, recorded.ErrorMessage = "*orders.DeclinedError", "orders: card declined: "+string(response[:min(len(response), 200)])
		require.NoError(t, store.Update(ctx, recorded))
		record(4, col, "UpdateItem", writeUnits(max(failedSize, size(failing.Key))))

		released := inProgress(now)
		require.NoError(t, store.Put(ctx, released, now))
		releasedSize := size(released.Key)
		require.NoError(t, store.Delete(ctx, released.Key, released.Token))
		record(5, col, "DeleteItem", writeUnits(releasedSize))

		if srv.Transactions {
			staged := inProgress(now)
			require.NoError(t, store.Put(ctx, staged, now))
			before := size(staged.Key)
			fin := completed(staged, response)
			fin.InProgressExpiresAt = time.Time{}
			require.NoError(t, store.Commit(ctx, fin, []any{increment(counters, rand.Text())}))
			// The staged write creates a counter item of a name, a number
			// and its key: under a KB.
			record(6, col, "TransactWriteItems", 2*writeUnits(max(before, size(staged.Key)))+2*writeUnits(1))
		}
	}
	return rows
}

// formatCapacity renders rows as a Markdown table: the measured units,
// and the documented ones in parentheses where they differ.
func formatCapacity(rows []capacityRow) string {
	var b strings.Builder
	b.WriteString("| step |")
	for _, sz := range capacitySizes {
		fmt.Fprintf(&b, " %s |", sz.name)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---:|", len(capacitySizes)))
	b.WriteByte('\n')
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s |", r.step)
		for i := range capacitySizes {
			switch m, e := r.measured[i], r.expected[i]; {
			case math.IsNaN(m):
				fmt.Fprintf(&b, " (%g) |", e)
			case m == e:
				fmt.Fprintf(&b, " %g |", m)
			default:
				fmt.Fprintf(&b, " %g (%g) |", m, e)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestCapacityUnits measures the capacity units each step of a call
// consumes on DynamoDB Local, by response size, and checks them against
// AWS's documented rules. Run with -v to see the table.
func TestCapacityUnits(t *testing.T) {
	srv := server{dynamotest.DynamoDBLocal.Shared(t)}
	rows := measureCapacity(t, srv)
	t.Logf("capacity units per step on %s (documented units in parentheses where DynamoDB Local reports other or none):\n%s", srv.Version, formatCapacity(rows))
	for _, r := range rows {
		for i, sz := range capacitySizes {
			want := r.expected[i]
			if r.step == stepCommit {
				// DynamoDB Local counts 4 units per KB written in a
				// transaction, where AWS documents 2.
				want *= 2
			}
			if m := r.measured[i]; !math.IsNaN(m) {
				assert.Equal(t, want, m, "%s, %s", r.step, sz.name)
			}
		}
	}
}

// An 8 KB JSON response is stored in at most 2 write units, compressed,
// in the encoding every version of the store reads (gzip, named by
// data_encoding); a replay reads it in 1 read unit.
func TestCompressionSavesWriteUnits(t *testing.T) {
	srv := server{dynamotest.DynamoDBLocal.Shared(t)}
	ctx := t.Context()
	name := srv.table(t)
	var m meter
	store := newStore(t, srv.NewClient(m.register), name)
	now := wholeSecond()

	rec := inProgress(now)
	require.NoError(t, store.Put(ctx, rec, now))
	response := testevents.OrdersResponse(8 << 10)
	require.NoError(t, store.Update(ctx, completed(rec, response)))
	_, units := m.last()
	assert.LessOrEqual(t, units, 2.0, "write units of the completion")
	item := srv.rawItem(t, name, idKey(rec.Key))
	assert.LessOrEqual(t, writeUnits(dynamodb.ItemSize(item)), 2.0, "documented write units of a %d-byte item", dynamodb.ItemSize(item))
	assert.Equal(t, &types.AttributeValueMemberS{Value: "gzip"}, item["data_encoding"])

	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	assert.Equal(t, response, got.Response)
	_, units = m.last()
	assert.Equal(t, 1.0, units, "read units of the replay")
}

// BenchmarkCompletionRequest builds the completion's request for
// responses of each size, compressed by default and not at all
// (CompressAbove -1): the CPU compression costs a call, against the bytes
// of the response it stores (stored-B/op). TestCapacityUnits has the units.
//
//	go test -run '^$' -bench CompletionRequest ./persistence/dynamodb/
func BenchmarkCompletionRequest(b *testing.B) {
	for _, mode := range []struct {
		name     string
		compress int
	}{{"default", 0}, {"uncompressed", -1}} {
		store, err := dynamodb.New(&awsdynamodb.Client{}, "table", func(o *dynamodb.Options) { o.CompressAbove = mode.compress })
		require.NoError(b, err)
		for _, sz := range capacitySizes {
			b.Run(mode.name+"/"+strings.ReplaceAll(sz.name, " ", ""), func(b *testing.B) {
				rec := completed(inProgress(wholeSecond()), testevents.OrdersResponse(sz.size))
				var in *awsdynamodb.UpdateItemInput
				for b.Loop() {
					if in, err = store.UpdateInput(rec); err != nil {
						b.Fatal(err)
					}
				}
				data := map[string]types.AttributeValue{"": in.ExpressionAttributeValues[":d"]}
				b.ReportMetric(float64(dynamodb.ItemSize(data)), "stored-B/op")
			})
		}
	}
}
