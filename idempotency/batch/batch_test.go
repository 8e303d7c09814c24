package batch_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/internal/testing/testlog"
	"github.com/retrysafe/retrysafe/internal/testing/teststeps"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// TestMixedBatches delivers mixed batches twice to each event type and
// checks the exact item identifiers reported, which records ran, and what
// became of their keys.
func TestMixedBatches(t *testing.T) {
	type delivery struct {
		failed []int    // record numbers reported as failed
		ran    []string // orders whose function ran, in batch order
	}
	cases := []struct {
		name    string
		done    []string // orders completed by an earlier batch
		held    []string // orders held in progress by another invocation
		storeUp bool     // false: every store request fails
		records []spec
		first   delivery
		again   delivery // the same batch delivered again
	}{
		{
			name:    "all succeed",
			storeUp: true,
			records: []spec{{n: 1, order: "o-1"}, {n: 2, order: "o-2"}, {n: 3, order: "o-3"}},
			first:   delivery{ran: []string{"o-1", "o-2", "o-3"}},
			again:   delivery{},
		},
		{
			name:    "mixed",
			storeUp: true,
			done:    []string{"done-1"},
			held:    []string{"busy-1"},
			records: []spec{
				{n: 1, order: "o-1"},
				{n: 2, order: "done-1"},
				{n: 3, order: "busy-1"},
				{n: 4, order: "fail-1"},
				{n: 5, order: "panic-1"},
				{n: 6, raw: `not json`},
				{n: 7, raw: `{"amount":42}`},
				{n: 8, order: "o-2"},
			},
			first: delivery{failed: []int{3, 4, 5, 6, 7}, ran: []string{"o-1", "fail-1", "panic-1", "o-2"}},
			// Only the failed records are worth delivering again, but the
			// whole batch comes again when the function times out, say.
			again: delivery{failed: []int{3, 4, 5, 6, 7}, ran: []string{"fail-1", "panic-1"}},
		},
		{
			name:    "every record fails",
			storeUp: true,
			records: []spec{{n: 1, order: "fail-1"}, {n: 2, order: "fail-2"}},
			first:   delivery{failed: []int{1, 2}, ran: []string{"fail-1", "fail-2"}},
			again:   delivery{failed: []int{1, 2}, ran: []string{"fail-1", "fail-2"}},
		},
		{
			name:    "duplicate in one batch",
			storeUp: true,
			records: []spec{{n: 1, order: "o-1"}, {n: 2, order: "o-1"}, {n: 3, order: "o-2"}},
			first:   delivery{ran: []string{"o-1", "o-2"}},
			again:   delivery{},
		},
		{
			name:    "store down",
			storeUp: false,
			records: []spec{{n: 1, order: "o-1"}, {n: 2, order: "o-2"}, {n: 3, order: "o-3"}},
			first:   delivery{failed: []int{1, 2, 3}},
			again:   delivery{failed: []int{1, 2, 3}},
		},
		{
			name:    "permanent error",
			storeUp: true,
			records: []spec{{n: 1, order: "perm-1"}, {n: 2, order: "o-1"}},
			first:   delivery{failed: []int{1}, ran: []string{"perm-1", "o-1"}},
			again:   delivery{failed: []int{1}},
		},
	}
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					mem := memory.New()
					store := faultstore.New(mem)
					rc := &recorder{}
					logger, _ := testlog.JSON() // kept out of the test output
					deliver := h.build(t, rc, store, idempotency.WithKey(h.key), idempotency.WithLogger(logger))
					ctx := t.Context()

					for i, order := range tc.done {
						failed, err := deliver(ctx, []spec{{n: 1000 + i, order: order}})
						require.NoError(t, err)
						require.Empty(t, failed)
					}
					for _, order := range tc.held {
						hold(t, mem, order)
					}
					rc.takeRuns()
					if !tc.storeUp {
						store.Fault = func(faultstore.Op, string, int) faultstore.Fault { return faultstore.FailBefore }
					}

					for i, want := range []delivery{tc.first, tc.again} {
						failed, err := deliver(ctx, tc.records)
						require.NoError(t, err, "delivery %d: no record failure fails the batch", i+1)
						assert.Equal(t, ids(h, want.failed...), failed, "delivery %d: failed items", i+1)
						if want.ran == nil {
							want.ran = []string{}
						}
						assert.Equal(t, want.ran, append([]string{}, orders(rc.takeRuns())...), "delivery %d: runs", i+1)
					}

					// Failed and panicked records released their keys;
					// processed ones are completed.
					store.Fault = nil
					for _, s := range tc.records {
						if s.order == "" {
							continue
						}
						rec, err := mem.Get(ctx, recordKey(t, s.order))
						switch {
						case !tc.storeUp, strings.HasPrefix(s.order, "fail"), strings.HasPrefix(s.order, "panic"):
							assert.ErrorIs(t, err, persistence.ErrNotFound, "the key of %s is released", s.order)
						case strings.HasPrefix(s.order, "busy"):
							require.NoError(t, err)
							assert.Equal(t, persistence.StatusInProgress, rec.Status)
						default:
							require.NoError(t, err, s.order)
							assert.Equal(t, persistence.StatusCompleted, rec.Status, s.order)
						}
					}
				})
			}
		})
	}
}

// TestFailureLogs checks the log line of each kind of failure: its reason
// and the record's identifier.
func TestFailureLogs(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			store := memory.New()
			logger, logs := testlog.JSON()
			deliver := h.build(t, &recorder{}, store, idempotency.WithKey(h.key), idempotency.WithLogger(logger))
			hold(t, store, "busy-1")
			holdForOperator(t, store, "held-1")
			failed, err := deliver(t.Context(), []spec{
				{n: 1, order: "o-1"},
				{n: 2, raw: "not json"},
				{n: 3, raw: `{"order_id":null}`},
				{n: 4, order: "busy-1"},
				{n: 5, order: "fail-1"},
				{n: 6, order: "panic-1"},
				{n: 7, order: "held-1"},
			})
			require.NoError(t, err)
			assert.Equal(t, ids(h, 2, 3, 4, 5, 6, 7), failed)

			assert.Equal(t, ids(h, 2, 3), failedByReason(t, logs, batch.ReasonBadRecord))
			assert.Equal(t, ids(h, 4), failedByReason(t, logs, string(idempotency.OutcomeInProgress)))
			assert.Equal(t, ids(h, 5), failedByReason(t, logs, string(idempotency.OutcomeHandlerError)))
			assert.Equal(t, ids(h, 6), failedByReason(t, logs, batch.ReasonPanic))
			assert.Equal(t, ids(h, 7), failedByReason(t, logs, string(idempotency.OutcomeHeld)))

			bad := logLines(t, logs, "bad record")
			require.Len(t, bad, 2)
			assert.Equal(t, h.key, bad[0]["key_expression"])
			assert.Equal(t, "ERROR", bad[0]["level"])
			assert.Contains(t, bad[0]["error"], "not valid JSON")
			assert.Contains(t, bad[1]["error"], "selected no idempotency key")

			panicked := logLines(t, logs, "panicked")
			require.Len(t, panicked, 1)
			assert.Contains(t, panicked[0]["error"], "panic: processing panic-1")
			assert.Contains(t, panicked[0]["stack"], "batch_test")

			summary := logLines(t, logs, "batch done")
			require.Len(t, summary, 1)
			assert.EqualValues(t, 7, summary[0]["records"])
			assert.EqualValues(t, 1, summary[0]["processed"])
			assert.EqualValues(t, 6, summary[0]["failed"])
		})
	}
}

// TestOrdering: once a record of a group fails, the later records of the
// group fail without running, on FIFO queues and streams; on a standard
// queue every record runs. Then the failed records come again, as SQS and
// Lambda deliver them, and each group's records run in order.
func TestOrdering(t *testing.T) {
	for _, parallelism := range []int{1, 3} {
		for _, h := range harnesses() {
			t.Run(h.name+"/parallelism="+string(rune('0'+parallelism)), func(t *testing.T) {
				store := memory.New()
				rc := &recorder{}
				deliver := h.build(t, rc, store, idempotency.WithKey(h.key), batch.WithParallelism(parallelism))
				records := []spec{
					{n: 1, order: "a-1", group: "A"},
					{n: 2, order: "b-1", group: "B"},
					{n: 3, order: "a-2", group: "A"}, // fails for now
					{n: 4, order: "b-2", group: "B"},
					{n: 5, order: "a-3", group: "A"},
					{n: 6, order: "c-1", group: "C"}, // in progress elsewhere
					{n: 7, order: "c-2", group: "C"},
					{n: 8, order: "b-3", group: "B"},
				}
				rc.setFailing("a-2", true)
				hold(t, store, "c-1")

				failed, err := deliver(t.Context(), records)
				require.NoError(t, err)
				runs := rc.takeRuns()
				if !h.ordered {
					assert.Equal(t, ids(h, 3, 6), failed)
					assert.ElementsMatch(t, []string{"a-1", "b-1", "a-2", "b-2", "a-3", "c-2", "b-3"}, orders(runs))
					return
				}
				assert.Equal(t, ids(h, 3, 5, 6, 7), failed)
				assert.ElementsMatch(t, []string{"a-1", "b-1", "a-2", "b-2", "b-3"}, orders(runs))
				assertGroupOrder(t, runs, records)

				// The failure clears and the other invocation completes c-1
				// (here: its reservation is gone). SQS redelivers the failed
				// messages, and Kafka each failed partition from its lowest
				// failed offset; a Kinesis or DynamoDB stream resumes at the
				// lowest failed sequence number, so b-2 and b-3 come again
				// too.
				rc.setFailing("a-2", false)
				require.NoError(t, store.Delete(t.Context(), recordKey(t, "c-1"), "another-invocation"))
				again := []spec{records[2], records[4], records[5], records[6]}
				if h.name != "sqs-fifo" && h.name != "kafka" {
					again = records[2:]
				}
				failed, err = deliver(t.Context(), again)
				require.NoError(t, err)
				assert.Empty(t, failed)
				runs = rc.takeRuns()
				assert.ElementsMatch(t, []string{"a-2", "a-3", "c-1", "c-2"}, orders(runs), "b-2 and b-3 are skipped as completed")
				assertGroupOrder(t, runs, records)
			})
		}
	}
}

// assertGroupOrder checks that the runs of each group follow the order of
// the records.
func assertGroupOrder(t *testing.T, runs []run, records []spec) {
	t.Helper()
	pos := make(map[string]int, len(records))
	for i, s := range records {
		pos[s.order] = i
	}
	last := map[string]int{}
	for _, r := range runs {
		g := records[pos[r.order]].group
		if p, ok := last[g]; ok {
			assert.Greater(t, pos[r.order], p, "group %s ran %s out of order", g, r.order)
		}
		last[g] = pos[r.order]
	}
}

// TestDefaultKey: without WithKey the key is the record's delivery
// identity, so a redelivered record is skipped, and a producer's re-send
// (a new message with the same payload) runs again.
func TestDefaultKey(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			rc := &recorder{}
			deliver := h.build(t, rc, memory.New())
			records := []spec{{n: 1, order: "o-1", group: "g"}, {n: 2, raw: "not json", group: "g"}}
			for range 2 {
				failed, err := deliver(t.Context(), records)
				require.NoError(t, err)
				assert.Empty(t, failed, "a payload that is not JSON does not matter to the default key")
			}
			assert.Equal(t, []string{"o-1", ""}, orders(rc.takeRuns()))

			failed, err := deliver(t.Context(), []spec{{n: 3, order: "o-1", group: "g"}})
			require.NoError(t, err)
			assert.Empty(t, failed)
			assert.Equal(t, []string{"o-1"}, orders(rc.takeRuns()), "a re-sent message has a new identity")
		})
	}
}

// TestContextDone: records whose turn comes after the invocation's context
// is done fail without running and without a store request.
func TestContextDone(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			store := faultstore.New(memory.New())
			rc := &recorder{}
			ctx, cancel := context.WithCancel(t.Context())
			rc.hook = func(context.Context, run) { cancel() }
			logger, logs := testlog.JSON()
			deliver := h.build(t, rc, store, idempotency.WithKey(h.key), idempotency.WithLogger(logger))
			failed, err := deliver(ctx, []spec{{n: 1, order: "o-1"}, {n: 2, order: "o-2"}, {n: 3, order: "o-3"}})
			require.NoError(t, err)
			assert.Equal(t, ids(h, 2, 3), failed)
			assert.Equal(t, []string{"o-1"}, orders(rc.takeRuns()))
			assert.Equal(t, 1, store.Calls(faultstore.OpPut))
			assert.Equal(t, ids(h, 2, 3), failedByReason(t, logs, batch.ReasonNotStarted))
		})
	}
}

// TestMissingIdentifier: a failed record without an identifier cannot be
// retried alone, so the whole batch fails.
func TestMissingIdentifier(t *testing.T) {
	rc := &recorder{}
	handler, err := batch.SQS(func(ctx context.Context, m events.SQSMessage) error {
		return rc.process(ctx, run{order: orderOf([]byte(m.Body))})
	}, memory.New(), idempotency.WithKey("powertools_json(body).order_id"))
	require.NoError(t, err)

	ok := events.SQSMessage{MessageId: "", Body: `{"order_id":"o-1"}`}
	resp, err := handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{ok}})
	require.NoError(t, err, "a record without identifier that succeeds is no problem")
	assert.Empty(t, resp.BatchItemFailures)

	bad := events.SQSMessage{MessageId: "", Body: `{"order_id":"fail-1"}`}
	good := events.SQSMessage{MessageId: "m-2", Body: `{"order_id":"fail-2"}`}
	resp, err = handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{bad, good}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "messageId")
	assert.Len(t, resp.BatchItemFailures, 2)
}

// TestOptions: invalid options fail when the handler is built.
func TestOptions(t *testing.T) {
	fn := func(context.Context, events.SQSMessage) error { return nil }
	store := memory.New()
	cases := map[string]struct {
		fn    func(context.Context, events.SQSMessage) error
		store persistence.Store
		opts  []idempotency.BatchOption
		want  string
	}{
		"bad expression":       {fn, store, []idempotency.BatchOption{idempotency.WithKey("powertools_json(body")}, "invalid expression"},
		"order dependent":      {fn, store, []idempotency.BatchOption{idempotency.WithKey("messageAttributes.*.stringValue")}, "order of object members"},
		"unknown function":     {fn, store, []idempotency.BatchOption{idempotency.WithKey("powertools_yaml(body)")}, "powertools_yaml"},
		"empty key":            {fn, store, []idempotency.BatchOption{idempotency.WithKey("")}, "empty expression"},
		"zero parallelism":     {fn, store, []idempotency.BatchOption{batch.WithParallelism(0)}, "WithParallelism(0)"},
		"nil logger":           {fn, store, []idempotency.BatchOption{idempotency.WithLogger(nil)}, "nil logger"},
		"nil option":           {fn, store, []idempotency.BatchOption{nil}, "nil option"},
		"given twice":          {fn, store, []idempotency.BatchOption{idempotency.WithKey("messageId"), idempotency.WithKey("body")}, "idempotency.WithKey given twice"},
		"bad core option":      {fn, store, []idempotency.BatchOption{idempotency.WithExpiry(0)}, "WithExpiry"},
		"nil function":         {nil, store, nil, "nil record function"},
		"nil store":            {fn, nil, nil, "nil persistence.Store"},
		"errors are collected": {fn, store, []idempotency.BatchOption{batch.WithParallelism(-1), idempotency.WithLogger(nil)}, "nil logger"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := batch.SQS(tc.fn, tc.store, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, h)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// The typed front ends share the checks.
	_, err := batch.Kinesis(nil, store)
	assert.Error(t, err)
	_, err = batch.DynamoDB(nil, store)
	assert.Error(t, err)
	_, err = batch.Kafka(nil, store)
	assert.Error(t, err)
	_, err = batch.Kafka(func(context.Context, events.KafkaRecord) error { return nil }, store, idempotency.WithKey("decoded_headers.*"))
	assert.ErrorContains(t, err, "order of object members")
	assert.Panics(t, func() { idempotency.Must(batch.SQS(fn, store, idempotency.WithKey("["))) })
}

// TestPrefix: the key prefix is the record function's, as idempotency.Wrap
// gives it, unless WithKeyPrefix sets another.
func TestPrefix(t *testing.T) {
	store := memory.New()
	keys = nil
	handler, err := batch.SQS(noteKey, store)
	require.NoError(t, err)
	_, err = handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1"}}})
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Regexp(t, `^batch_test\.noteKey#[0-9a-f]{64}$`, keys[0])

	keys = nil
	handler, err = batch.SQS(noteKey, store, idempotency.WithKeyPrefix("orders"))
	require.NoError(t, err)
	_, err = handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1"}}})
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Regexp(t, `^orders#[0-9a-f]{64}$`, keys[0])
}

// keys are the keys noteKey saw.
var keys []string

// noteKey is a record function with a stable Go name.
func noteKey(ctx context.Context, _ events.SQSMessage) error {
	key, _ := idempotency.KeyFromContext(ctx)
	keys = append(keys, key)
	return nil
}

// TestDisabled: with idempotency turned off, records run every time and
// failures are still reported per record.
func TestDisabled(t *testing.T) {
	t.Setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
	h := sqsHarness(false)
	rc := &recorder{}
	deliver := h.build(t, rc, memory.New(), idempotency.WithKey(h.key))
	records := []spec{{n: 1, order: "o-1"}, {n: 2, order: "fail-1"}, {n: 3, order: "panic-1"}}
	for range 2 {
		failed, err := deliver(t.Context(), records)
		require.NoError(t, err)
		assert.Equal(t, ids(h, 2, 3), failed)
	}
	assert.Equal(t, []string{"o-1", "fail-1", "panic-1", "o-1", "fail-1", "panic-1"}, orders(rc.takeRuns()))
}

// TestObserver: the core's options pass through; an observer sees every
// record's steps.
func TestObserver(t *testing.T) {
	var steps teststeps.Log
	h := sqsHarness(false)
	deliver := h.build(t, &recorder{}, memory.New(), idempotency.WithKey(h.key), idempotency.WithObserver(&steps))
	records := []spec{{n: 1, order: "o-1"}, {n: 2, order: "fail-1"}}
	for range 2 {
		_, err := deliver(t.Context(), records)
		require.NoError(t, err)
	}
	assert.Equal(t, []string{
		"reserved", "complete", "new",
		"reserved", "release", "handler_error",
		"replay",
		"reserved", "release", "handler_error",
	}, steps.Steps())
}

// TestStoreFailsOnCompletion: when storing a record's completion fails, the
// record still counts as processed (the core keeps the key reserved until
// the invocation's deadline), so it is not delivered again now.
func TestStoreFailsOnCompletion(t *testing.T) {
	h := sqsHarness(false)
	store := faultstore.New(memory.New())
	store.Fault = faultstore.On(faultstore.OpUpdate, 1, faultstore.FailBefore)
	rc := &recorder{}
	deliver := h.build(t, rc, store, idempotency.WithKey(h.key))
	failed, err := deliver(t.Context(), []spec{{n: 1, order: "o-1"}, {n: 2, order: "o-2"}})
	require.NoError(t, err)
	assert.Empty(t, failed)
	assert.Equal(t, []string{"o-1", "o-2"}, orders(rc.takeRuns()))

	// Delivered again before that deadline, the record is in progress.
	failed, err = deliver(t.Context(), []spec{{n: 1, order: "o-1"}, {n: 2, order: "o-2"}})
	require.NoError(t, err)
	assert.Equal(t, ids(h, 1), failed)
	assert.Empty(t, rc.takeRuns())
}

// TestSampleEvents runs the sample events of aws-lambda-go as they are:
// the default keys work on them, a key expression over their payloads
// fails them record by record, and the responses encode as Lambda expects.
func TestSampleEvents(t *testing.T) {
	ctx := t.Context()
	quiet := idempotency.WithLogger(slog.New(slog.DiscardHandler))

	t.Run("sqs", func(t *testing.T) {
		var event events.SQSEvent
		loadEvent(t, "sqs-event.json", &event)
		runs := 0
		handler, err := batch.SQS(func(context.Context, events.SQSMessage) error { runs++; return nil }, memory.New(), quiet)
		require.NoError(t, err)
		for range 2 {
			resp, err := handler(ctx, event)
			require.NoError(t, err)
			out, err := json.Marshal(resp)
			require.NoError(t, err)
			assert.JSONEq(t, `{"batchItemFailures":[]}`, string(out))
		}
		assert.Equal(t, 1, runs)

		// "Message Body" is not JSON.
		handler, err = batch.SQS(func(context.Context, events.SQSMessage) error { runs++; return nil }, memory.New(),
			quiet, idempotency.WithKey("powertools_json(body).order_id"))
		require.NoError(t, err)
		resp, err := handler(ctx, event)
		require.NoError(t, err)
		out, err := json.Marshal(resp)
		require.NoError(t, err)
		assert.JSONEq(t, `{"batchItemFailures":[{"itemIdentifier":"MessageID_1"}]}`, string(out))
	})

	t.Run("kinesis", func(t *testing.T) {
		var event events.KinesisEvent
		loadEvent(t, "kinesis-event.json", &event)
		var data []string
		handler, err := batch.Kinesis(func(_ context.Context, r events.KinesisEventRecord) error {
			data = append(data, string(r.Kinesis.Data))
			return nil
		}, memory.New(), quiet)
		require.NoError(t, err)
		for range 2 {
			resp, err := handler(ctx, event)
			require.NoError(t, err)
			assert.Empty(t, resp.BatchItemFailures)
		}
		assert.Equal(t, []string{"Hello World", "Hello World"}, data, "two records with one payload are two events")

		// The payload is base64, "Hello World": powertools_base64 decodes
		// it, powertools_json cannot. Both records share partition key
		// s1, so the second is held back behind the first.
		handler, err = batch.Kinesis(func(context.Context, events.KinesisEventRecord) error { return nil }, memory.New(),
			quiet, idempotency.WithKey("powertools_json(powertools_base64(kinesis.data)).id"))
		require.NoError(t, err)
		resp, err := handler(ctx, event)
		require.NoError(t, err)
		out, err := json.Marshal(resp)
		require.NoError(t, err)
		assert.JSONEq(t, `{"batchItemFailures":[
			{"itemIdentifier":"49568167373333333333333333333333333333333333333333333333"},
			{"itemIdentifier":"49568167373333333334444444444444444444444444444444444444"}]}`, string(out))

		// The decoded text itself is a fine key.
		data = nil
		handler, err = batch.Kinesis(func(_ context.Context, r events.KinesisEventRecord) error {
			data = append(data, string(r.Kinesis.Data))
			return nil
		}, memory.New(), quiet, idempotency.WithKey("powertools_base64(kinesis.data)"))
		require.NoError(t, err)
		resp, err = handler(ctx, event)
		require.NoError(t, err)
		assert.Empty(t, resp.BatchItemFailures)
		assert.Equal(t, []string{"Hello World"}, data, "the second record has the first's key, and is skipped")
	})

	t.Run("dynamodb", func(t *testing.T) {
		var event events.DynamoDBEvent
		loadEvent(t, "dynamodb-event.json", &event)
		require.Len(t, event.Records, 2)
		var seqs []string
		handler, err := batch.DynamoDB(func(_ context.Context, r events.DynamoDBEventRecord) error {
			seqs = append(seqs, r.Change.SequenceNumber)
			return errors.New("failed")
		}, memory.New(), quiet)
		require.NoError(t, err)
		resp, err := handler(ctx, event)
		require.NoError(t, err)
		out, err := json.Marshal(resp)
		require.NoError(t, err)
		// One item (same Keys): the second change waits for the first.
		// (The sample's two records carry one sequence number.)
		assert.JSONEq(t, `{"batchItemFailures":[
			{"itemIdentifier":"1405400000000002063282832"},
			{"itemIdentifier":"1405400000000002063282832"}]}`, string(out))
		assert.Equal(t, []string{"1405400000000002063282832"}, seqs)

		// dynamodb.Keys alone identifies the item, not the change: the
		// second change would be skipped as completed.
		seqs = nil
		handler, err = batch.DynamoDB(func(_ context.Context, r events.DynamoDBEventRecord) error {
			seqs = append(seqs, r.Change.SequenceNumber)
			return nil
		}, memory.New(), quiet, idempotency.WithKey("dynamodb.Keys"))
		require.NoError(t, err)
		resp, err = handler(ctx, event)
		require.NoError(t, err)
		assert.Empty(t, resp.BatchItemFailures)
		assert.Equal(t, []string{"1405400000000002063282832"}, seqs)
	})
}

// TestTenants: under Lambda's tenant isolation mode, the same records
// delivered to two tenants run once for each tenant, and again for
// neither.
func TestTenants(t *testing.T) {
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			rc := &recorder{}
			deliver := h.build(t, rc, memory.New(), idempotency.WithKey(h.key))
			records := []spec{{n: 1, order: "o-1", group: "g"}}
			for range 2 {
				for _, tenant := range []string{"blue", "green"} {
					ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{TenantID: tenant})
					failed, err := deliver(ctx, records)
					require.NoError(t, err)
					assert.Empty(t, failed)
				}
			}
			assert.Equal(t, []string{"o-1", "o-1"}, orders(rc.takeRuns()), "once for each tenant")
		})
	}
}
