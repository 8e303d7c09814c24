package batch_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/internal/testing/testlog"
	"github.com/retrysafe/retrysafe/persistence"
)

// The tests run one scenario against the four event types through a
// harness per type. Records are described by a spec; each harness builds
// its event type from the real sample event of aws-lambda-go
// (testdata/events at the module root, testdata here for Kafka), with the
// spec's payload, and maps record numbers to that type's item identifier.

const prefix = "batch-test"

// spec describes one record of a batch.
type spec struct {
	n     int    // the record's number: its identifier derives from it
	order string // the order ID in the JSON payload
	raw   string // the payload itself, when set (bad records)
	group string // the ordering group: FIFO message group, partition key, item key
}

func (s spec) payload() string {
	if s.raw != "" {
		return s.raw
	}
	return fmt.Sprintf(`{"order_id":%q,"amount":42}`, s.order)
}

// run is one run of the record function, as the recorder saw it.
type run struct {
	order string
	id    string // the record's item identifier
	group string
}

var (
	errDeclined  = errors.New("order declined")
	errTransient = errors.New("downstream unavailable")
)

// recorder is the record function of the tests: its runs are the side
// effects. It fails for orders starting with "fail" (and those in
// failing), panics for orders starting with "panic", and returns a
// permanent error for orders starting with "perm".
type recorder struct {
	mu      sync.Mutex
	runs    []run
	failing map[string]bool

	// hook, when set, runs inside the function before it decides.
	hook func(ctx context.Context, r run)
}

func (rc *recorder) process(ctx context.Context, r run) error {
	if _, ok := idempotency.KeyFromContext(ctx); !ok && os.Getenv("POWERTOOLS_IDEMPOTENCY_DISABLED") == "" {
		return errors.New("the record function's context carries no idempotency key")
	}
	rc.mu.Lock()
	rc.runs = append(rc.runs, r)
	failing := rc.failing[r.order]
	hook := rc.hook
	rc.mu.Unlock()
	if hook != nil {
		hook(ctx, r)
	}
	switch {
	case strings.HasPrefix(r.order, "fail"):
		return errDeclined
	case strings.HasPrefix(r.order, "panic"):
		panic("processing " + r.order)
	case strings.HasPrefix(r.order, "perm"):
		return idempotency.Permanent(errDeclined)
	case failing:
		return errTransient
	}
	return nil
}

func (rc *recorder) setFailing(order string, on bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.failing == nil {
		rc.failing = make(map[string]bool)
	}
	rc.failing[order] = on
}

// takeRuns returns the runs so far and forgets them.
func (rc *recorder) takeRuns() []run {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	runs := rc.runs
	rc.runs = nil
	return runs
}

func orders(runs []run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.order
	}
	return out
}

// orderOf decodes the order ID of a payload, or "" when there is none.
func orderOf(payload []byte) string {
	var o struct {
		OrderID string `json:"order_id"`
	}
	_ = json.Unmarshal(payload, &o)
	return o.OrderID
}

// harness runs batches of one event type.
type harness struct {
	name string
	// key selects the order ID from a record of this type.
	key string
	// id maps a record number to the item identifier of this type.
	id func(n int) string
	// ordered reports whether the type keeps records in order by group
	// (for SQS: a FIFO queue).
	ordered bool
	// build returns a batch handler over store with the recorder as the
	// record function.
	build func(t testing.TB, rc *recorder, store persistence.Store, opts ...idempotency.BatchOption) func(context.Context, []spec) ([]string, error)
}

func ids(h harness, ns ...int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = h.id(n)
	}
	return out
}

func sqsID(n int) string { return fmt.Sprintf("059f36b4-87a3-44ab-83d2-%012d", n) }

func kinesisSeq(n int) string {
	return fmt.Sprintf("4956816737333333333333333333333333333333333333%010d", n)
}

func dynamoDBSeq(n int) string { return fmt.Sprintf("14054000000000020632%06d", n) }

// loadEvent decodes a sample event of testdata/events at the module root.
func loadEvent(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "events", name))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// loadKafkaEvent decodes the sample Kafka event of aws-lambda-go, which
// testdata here holds.
func loadKafkaEvent(t testing.TB, event *events.KafkaEvent) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kafka-event.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, event))
}

// baseOpts adds the tests' key prefix and a silent logger to opts, unless
// opts set their own.
func baseOpts(opts []idempotency.BatchOption) []idempotency.BatchOption {
	given := &core.Config{}
	for _, o := range opts {
		if o, ok := o.(core.Option); ok {
			o.Configure(given)
		}
	}
	if !given.Given("idempotency.WithKeyPrefix") {
		opts = append(opts, idempotency.WithKeyPrefix(prefix))
	}
	if !given.Given("idempotency.WithLogger") {
		opts = append(opts, idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	}
	return opts
}

func sqsHarness(fifo bool) harness {
	name, arn := "sqs", "arn:aws:sqs:us-west-2:123456789012:orders"
	if fifo {
		name, arn = "sqs-fifo", arn+".fifo"
	}
	return harness{
		name: name, key: "powertools_json(body).order_id", id: sqsID, ordered: fifo,
		build: func(t testing.TB, rc *recorder, store persistence.Store, opts ...idempotency.BatchOption) func(context.Context, []spec) ([]string, error) {
			var sample events.SQSEvent
			loadEvent(t, "sqs-event.json", &sample)
			handler, err := batch.SQS(func(ctx context.Context, m events.SQSMessage) error {
				return rc.process(ctx, run{order: orderOf([]byte(m.Body)), id: m.MessageId, group: m.Attributes["MessageGroupId"]})
			}, store, baseOpts(opts)...)
			require.NoError(t, err)
			return func(ctx context.Context, specs []spec) ([]string, error) {
				var event events.SQSEvent
				for _, s := range specs {
					m := sample.Records[0]
					m.MessageId = sqsID(s.n)
					m.Body = s.payload()
					m.EventSourceARN = arn
					m.Attributes = map[string]string{"ApproximateReceiveCount": "1"}
					if fifo {
						m.Attributes["MessageGroupId"] = s.group
						if s.group == "" {
							m.Attributes["MessageGroupId"] = fmt.Sprintf("g-%d", s.n)
						}
					}
					event.Records = append(event.Records, m)
				}
				resp, err := handler(ctx, event)
				return failedIDs(t, resp.BatchItemFailures, func(f events.SQSBatchItemFailure) string { return f.ItemIdentifier }), err
			}
		},
	}
}

func kinesisHarness() harness {
	return harness{
		name: "kinesis", key: "powertools_json(powertools_base64(kinesis.data)).order_id", id: kinesisSeq, ordered: true,
		build: func(t testing.TB, rc *recorder, store persistence.Store, opts ...idempotency.BatchOption) func(context.Context, []spec) ([]string, error) {
			var sample events.KinesisEvent
			loadEvent(t, "kinesis-event.json", &sample)
			handler, err := batch.Kinesis(func(ctx context.Context, r events.KinesisEventRecord) error {
				return rc.process(ctx, run{order: orderOf(r.Kinesis.Data), id: r.Kinesis.SequenceNumber, group: r.Kinesis.PartitionKey})
			}, store, baseOpts(opts)...)
			require.NoError(t, err)
			return func(ctx context.Context, specs []spec) ([]string, error) {
				var event events.KinesisEvent
				for _, s := range specs {
					r := sample.Records[0]
					r.Kinesis.SequenceNumber = kinesisSeq(s.n)
					r.EventID = "shardId-000000000000:" + r.Kinesis.SequenceNumber
					r.Kinesis.Data = []byte(s.payload())
					r.Kinesis.PartitionKey = s.group
					if s.group == "" {
						r.Kinesis.PartitionKey = fmt.Sprintf("pk-%d", s.n)
					}
					event.Records = append(event.Records, r)
				}
				resp, err := handler(ctx, event)
				return failedIDs(t, resp.BatchItemFailures, func(f events.KinesisBatchItemFailure) string { return f.ItemIdentifier }), err
			}
		},
	}
}

func dynamoDBHarness() harness {
	return harness{
		name: "dynamodb", key: "powertools_json(dynamodb.NewImage.payload.S).order_id", id: dynamoDBSeq, ordered: true,
		build: func(t testing.TB, rc *recorder, store persistence.Store, opts ...idempotency.BatchOption) func(context.Context, []spec) ([]string, error) {
			var sample events.DynamoDBEvent
			loadEvent(t, "dynamodb-event.json", &sample)
			handler, err := batch.DynamoDB(func(ctx context.Context, r events.DynamoDBEventRecord) error {
				return rc.process(ctx, run{order: orderOf([]byte(r.Change.NewImage["payload"].String())), id: r.Change.SequenceNumber, group: r.Change.Keys["pk"].String()})
			}, store, baseOpts(opts)...)
			require.NoError(t, err)
			return func(ctx context.Context, specs []spec) ([]string, error) {
				var event events.DynamoDBEvent
				for _, s := range specs {
					r := sample.Records[0]
					r.EventID = fmt.Sprintf("f07f8ca4b0b26cb9c4e5e77e%08d", s.n)
					r.Change.SequenceNumber = dynamoDBSeq(s.n)
					item := s.group
					if item == "" {
						item = fmt.Sprintf("item-%d", s.n)
					}
					r.Change.Keys = map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(item)}
					r.Change.NewImage = map[string]events.DynamoDBAttributeValue{
						"pk":      events.NewStringAttribute(item),
						"payload": events.NewStringAttribute(s.payload()),
					}
					event.Records = append(event.Records, r)
				}
				resp, err := handler(ctx, event)
				return failedIDs(t, resp.BatchItemFailures, func(f events.DynamoDBBatchItemFailure) string { return f.ItemIdentifier }), err
			}
		},
	}
}

// kafkaHarness builds Kafka events: a spec's group is a partition of the
// sample's topic, numbered in order of first appearance (a record without
// group has a partition of its own), its number the record's offset, and
// its payload the base64 value. An item identifier is written
// "<topic>-<partition>@<offset>", as the log lines write it. The event
// keeps the records of a partition in batch order; the handler takes the
// partitions in order of their numbers, so a batch whose groups do not
// interleave runs in batch order.
func kafkaHarness() harness {
	var (
		mu         sync.Mutex
		partitions = map[string]int64{} // by group
		numbers    = map[int]int64{}    // record number to partition
	)
	const topic = "AWSKafkaTopic" // the sample's
	partition := func(s spec) int64 {
		mu.Lock()
		defer mu.Unlock()
		group := s.group
		if group == "" {
			group = fmt.Sprintf("#%d", s.n)
		}
		p, ok := partitions[group]
		if !ok {
			p = int64(len(partitions))
			partitions[group] = p
		}
		numbers[s.n] = p
		return p
	}
	id := func(n int) string {
		mu.Lock()
		defer mu.Unlock()
		p, ok := numbers[n]
		if !ok {
			return fmt.Sprintf("record %d was never delivered", n)
		}
		return fmt.Sprintf("%s-%d@%d", topic, p, n)
	}
	return harness{
		name: "kafka", key: "powertools_json(decoded_value).order_id", id: id, ordered: true,
		build: func(t testing.TB, rc *recorder, store persistence.Store, opts ...idempotency.BatchOption) func(context.Context, []spec) ([]string, error) {
			var sample events.KafkaEvent
			loadKafkaEvent(t, &sample)
			handler, err := batch.Kafka(func(ctx context.Context, r events.KafkaRecord) error {
				value, err := base64.StdEncoding.DecodeString(r.Value)
				if err != nil {
					return err
				}
				tp := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
				return rc.process(ctx, run{order: orderOf(value), id: fmt.Sprintf("%s@%d", tp, r.Offset), group: tp})
			}, store, baseOpts(opts)...)
			require.NoError(t, err)
			return func(ctx context.Context, specs []spec) ([]string, error) {
				event := sample
				event.Records = map[string][]events.KafkaRecord{}
				for _, s := range specs {
					r := sample.Records["AWSKafkaTopic-0"][0]
					r.Topic = topic
					r.Partition = partition(s)
					r.Offset = int64(s.n)
					r.Key = base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "key-%d", s.n))
					r.Value = base64.StdEncoding.EncodeToString([]byte(s.payload()))
					tp := fmt.Sprintf("%s-%d", topic, r.Partition)
					event.Records[tp] = append(event.Records[tp], r)
				}
				resp, err := handler(ctx, event)
				return failedIDs(t, resp.BatchItemFailures, func(f batch.KafkaBatchItemFailure) string {
					return fmt.Sprintf("%s@%d", f.ItemIdentifier.Partition, f.ItemIdentifier.Offset)
				}), err
			}
		},
	}
}

// harnesses are the event types, with SQS as a standard and a FIFO queue.
func harnesses() []harness {
	return []harness{sqsHarness(false), sqsHarness(true), kinesisHarness(), dynamoDBHarness(), kafkaHarness()}
}

// recordKey returns the idempotency key of an order, as the batch derives
// it: the prefix and the hash of the canonical JSON of the order ID.
func recordKey(t testing.TB, order string) string {
	t.Helper()
	material, err := json.Marshal(order)
	require.NoError(t, err)
	sum := sha256.Sum256(material)
	return prefix + "#" + hex.EncodeToString(sum[:])
}

// hold reserves an order's key as another invocation that is still
// running would.
func hold(t testing.TB, store persistence.Store, order string) {
	t.Helper()
	now := time.Now()
	require.NoError(t, store.Put(context.Background(), &persistence.Record{
		Key:                 recordKey(t, order),
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour).Truncate(time.Second),
		InProgressExpiresAt: now.Add(time.Hour),
		Token:               "another-invocation",
	}, now))
}

// holdForOperator reserves an order's key as an invocation with
// idempotency.WithHoldUntilReleased that ended without an outcome leaves
// it: held, past its in-progress expiry.
func holdForOperator(t testing.TB, store persistence.Store, order string) {
	t.Helper()
	then := time.Now().Add(-time.Minute)
	require.NoError(t, store.Put(context.Background(), &persistence.Record{
		Key:                 recordKey(t, order),
		Status:              persistence.StatusInProgress,
		ExpiresAt:           then.Add(time.Hour).Truncate(time.Second),
		InProgressExpiresAt: then.Add(time.Second),
		Token:               "an-invocation-that-timed-out",
		Held:                true,
	}, then))
}

// logLines returns the decoded lines of a testlog.JSON logger whose
// message contains substr.
func logLines(t testing.TB, logs *testlog.Buffer, substr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if msg, _ := m["msg"].(string); strings.Contains(msg, substr) {
			out = append(out, m)
		}
	}
	return out
}

// failedByReason returns the item identifiers logged as failed for
// reason, in log order.
func failedByReason(t testing.TB, logs *testlog.Buffer, reason string) []string {
	t.Helper()
	var out []string
	for _, m := range logLines(t, logs, "") {
		if m["reason"] == reason {
			out = append(out, m["item_identifier"].(string))
		}
	}
	return out
}

// failedIDs returns the identifiers of a batch response's failures, as id
// reads them. The adapters answer an empty list, never null.
func failedIDs[F any](t testing.TB, failures []F, id func(F) string) []string {
	require.NotNil(t, failures, "an empty list, never null")
	out := make([]string, len(failures))
	for i, f := range failures {
		out[i] = id(f)
	}
	return out
}
