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
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/batch"
	"github.com/retrysafe/retrysafe/internal/testing/testlog"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// TestKafkaSampleEvent runs the sample MSK event of aws-lambda-go as it
// is: the default key works on it, its value is text but not JSON, its
// header value is not text, and the responses encode as Lambda expects.
func TestKafkaSampleEvent(t *testing.T) {
	ctx := t.Context()
	quiet := idempotency.WithLogger(slog.New(slog.DiscardHandler))
	var event events.KafkaEvent
	loadKafkaEvent(t, &event)
	const failedJSON = `{"batchItemFailures":[{"itemIdentifier":{"partition":"AWSKafkaTopic-0","offset":0}}]}`

	encode := func(resp batch.KafkaEventResponse) string {
		out, err := json.Marshal(resp)
		require.NoError(t, err)
		return string(out)
	}

	var values []string
	record := func(_ context.Context, r events.KafkaRecord) error {
		values = append(values, r.Value)
		return nil
	}
	handler, err := batch.Kafka(record, memory.New(), quiet)
	require.NoError(t, err)
	for range 2 {
		resp, err := handler(ctx, event)
		require.NoError(t, err)
		assert.JSONEq(t, `{"batchItemFailures":[]}`, encode(resp))
	}
	assert.Equal(t, []string{"OGQ1NTk2YjQtMTgxMy00MjM4LWIyNGItNmRhZDhlM2QxYzBj"}, values,
		"the function receives the record as Lambda sends it, and runs once")

	for _, tc := range []struct {
		key  string
		fail bool
	}{
		{"decoded_value", false},            // "8d5596b4-1813-4238-b24b-6dad8e3d1c0c"
		{"decoded_key", false},              // the same text
		{"powertools_base64(value)", false}, // the same key as decoded_value
		{"json_value", true},                // the text is not JSON
		{"powertools_json(decoded_value).id", true},
		{"decoded_headers.headerKey", true}, // 0x76 0xdc 0x00 0x7f 0x80 is not UTF-8
		{"headers[0].headerKey", false},     // the bytes as numbers
	} {
		t.Run(tc.key, func(t *testing.T) {
			handler, err := batch.Kafka(func(context.Context, events.KafkaRecord) error { return nil }, memory.New(),
				quiet, idempotency.WithKey(tc.key))
			require.NoError(t, err)
			resp, err := handler(ctx, event)
			require.NoError(t, err)
			if tc.fail {
				assert.JSONEq(t, failedJSON, encode(resp))
			} else {
				assert.JSONEq(t, `{"batchItemFailures":[]}`, encode(resp))
			}
		})
	}

	handler, err = batch.Kafka(func(context.Context, events.KafkaRecord) error { return errors.New("failed") }, memory.New(), quiet)
	require.NoError(t, err)
	resp, err := handler(ctx, event)
	require.NoError(t, err)
	assert.JSONEq(t, failedJSON, encode(resp))
}

// kafkaRecord returns a record of topic "orders" with a base64 value and
// headers, as Lambda sends them.
func kafkaRecord(partition, offset int64, value string, headers ...map[string]events.JSONNumberBytes) events.KafkaRecord {
	return events.KafkaRecord{
		Topic: "orders", Partition: partition, Offset: offset,
		Timestamp: events.MilliSecondsEpochTime{}, TimestampType: "CREATE_TIME",
		Key:     base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "customer-%d", offset%3)),
		Value:   base64.StdEncoding.EncodeToString([]byte(value)),
		Headers: headers,
	}
}

// kafkaEvent keys records by their topic-partitions, as Lambda does.
func kafkaEvent(records ...events.KafkaRecord) events.KafkaEvent {
	event := events.KafkaEvent{EventSource: "aws:kafka", Records: map[string][]events.KafkaRecord{}}
	for _, r := range records {
		tp := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
		event.Records[tp] = append(event.Records[tp], r)
	}
	return event
}

// TestKafkaKeys: key expressions search the record as Lambda sends it, and
// its decoded parts; the spellings of one selection give one key.
func TestKafkaKeys(t *testing.T) {
	value := `{"order_id": "o-1", "amount": 12345678901234567890}`
	headers := []map[string]events.JSONNumberBytes{
		{"idempotency-key": events.JSONNumberBytes("k-1")},
		{"trace": events.JSONNumberBytes{0xff, 0xfe}},
		{"idempotency-key": events.JSONNumberBytes("k-2")}, // the last of a name counts
	}
	rec := kafkaRecord(3, 42, value, headers...)

	keyOf := func(t *testing.T, expr string, rec events.KafkaRecord) (string, []string) {
		t.Helper()
		var seen string
		logger, logs := testlog.JSON()
		opts := []idempotency.BatchOption{idempotency.WithKeyPrefix("p"), idempotency.WithLogger(logger)}
		if expr != "" {
			opts = append(opts, idempotency.WithKey(expr))
		}
		handler, err := batch.Kafka(func(ctx context.Context, _ events.KafkaRecord) error {
			seen, _ = idempotency.KeyFromContext(ctx)
			return nil
		}, memory.New(), opts...)
		require.NoError(t, err)
		_, err = handler(t.Context(), kafkaEvent(rec))
		require.NoError(t, err)
		var errs []string
		for _, line := range logLines(t, logs, "bad record") {
			errs = append(errs, line["error"].(string))
		}
		return seen, errs
	}
	want := func(_ *testing.T, material string) string { return "p#" + hashOf(material) }

	t.Run("default", func(t *testing.T) {
		key, _ := keyOf(t, "", rec)
		assert.Equal(t, want(t, `["orders",3,42]`), key)
		assert.Equal(t, batch.DefaultKafkaKey, "[topic, partition, offset]")
	})
	t.Run("one order ID, three spellings", func(t *testing.T) {
		for _, expr := range []string{
			"json_value.order_id",
			"powertools_json(decoded_value).order_id",
			"powertools_json(powertools_base64(value)).order_id", // as written for Powertools
		} {
			key, errs := keyOf(t, expr, rec)
			assert.Empty(t, errs)
			assert.Equal(t, want(t, `"o-1"`), key, expr)
		}
	})
	t.Run("numbers stay exact", func(t *testing.T) {
		for _, expr := range []string{"json_value.amount", "powertools_json(decoded_value).amount"} {
			key, _ := keyOf(t, expr, rec)
			assert.Equal(t, want(t, `12345678901234567890`), key, expr)
		}
	})
	t.Run("decoded parts", func(t *testing.T) {
		key, _ := keyOf(t, `decoded_headers."idempotency-key"`, rec)
		assert.Equal(t, want(t, `"k-2"`), key)
		key, _ = keyOf(t, "decoded_key", rec)
		assert.Equal(t, want(t, `"customer-0"`), key)
		key, _ = keyOf(t, "[decoded_key, json_value.order_id]", rec)
		assert.Equal(t, want(t, `["customer-0","o-1"]`), key)
		key, _ = keyOf(t, "decoded_value", kafkaRecord(0, 1, "plain text"))
		assert.Equal(t, want(t, `"plain text"`), key)
	})
	t.Run("no key", func(t *testing.T) {
		for _, tc := range []struct {
			expr string
			rec  events.KafkaRecord
			err  string
		}{
			{"json_value.order_id", kafkaRecord(0, 1, "not json"), "selected no idempotency key"},
			{"powertools_json(decoded_value).order_id", kafkaRecord(0, 1, "not json"), "not valid JSON"},
			{"decoded_value", kafkaRecord(0, 1, "\xff\xfe binary"), "selected no idempotency key"},
			{"decoded_headers.trace", rec, "selected no idempotency key"},
			{"decoded_headers.missing", rec, "selected no idempotency key"},
			{"json_value", func() events.KafkaRecord { r := rec; r.Value = ""; return r }(), "selected no idempotency key"},
		} {
			key, errs := keyOf(t, tc.expr, tc.rec)
			assert.Empty(t, key, tc.expr)
			require.Len(t, errs, 1, tc.expr)
			assert.Contains(t, errs[0], tc.err, tc.expr)
		}
	})
}

// hashOf returns the hex SHA-256 of a key's canonical material.
func hashOf(material string) string {
	sum := sha256.Sum256([]byte(material))
	return hex.EncodeToString(sum[:])
}

// TestKafkaPartitions: the records of a topic-partition run in order and
// stop at the first failure; the other partitions go on, in parallel with
// WithParallelism. The response names each failed record by
// topic-partition and offset, the partitions in order of their numbers.
func TestKafkaPartitions(t *testing.T) {
	for _, parallelism := range []int{1, 4} {
		t.Run(fmt.Sprintf("parallelism=%d", parallelism), func(t *testing.T) {
			var (
				mu  sync.Mutex
				ran []string
			)
			handler, err := batch.Kafka(func(_ context.Context, r events.KafkaRecord) error {
				if v, _ := base64.StdEncoding.DecodeString(r.Value); string(v) == "fail" {
					return errors.New("failed")
				}
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, fmt.Sprintf("%d@%d", r.Partition, r.Offset))
				return nil
			}, memory.New(), idempotency.WithLogger(slog.New(slog.DiscardHandler)), batch.WithParallelism(parallelism))
			require.NoError(t, err)

			resp, err := handler(t.Context(), kafkaEvent(
				kafkaRecord(10, 5, "ok"), kafkaRecord(10, 6, "fail"), kafkaRecord(10, 7, "ok"),
				kafkaRecord(2, 100, "ok"), kafkaRecord(2, 101, "ok"),
				kafkaRecord(0, 8, "fail"),
			))
			require.NoError(t, err)
			out, err := json.Marshal(resp)
			require.NoError(t, err)
			assert.JSONEq(t, `{"batchItemFailures":[
				{"itemIdentifier":{"partition":"orders-0","offset":8}},
				{"itemIdentifier":{"partition":"orders-10","offset":6}},
				{"itemIdentifier":{"partition":"orders-10","offset":7}}]}`, string(out))
			if parallelism == 1 {
				assert.Equal(t, []string{"2@100", "2@101", "10@5"}, ran)
				return
			}
			assert.ElementsMatch(t, []string{"2@100", "2@101", "10@5"}, ran)
			assert.Less(t, slices.Index(ran, "2@100"), slices.Index(ran, "2@101"), "a partition runs in order")
		})
	}
}

// TestKafkaMissingTopic: a failed record without a topic cannot be named
// to Lambda, so the whole batch fails.
func TestKafkaMissingTopic(t *testing.T) {
	handler, err := batch.Kafka(func(_ context.Context, r events.KafkaRecord) error {
		v, _ := base64.StdEncoding.DecodeString(r.Value)
		if string(v) == "fail" {
			return errors.New("failed")
		}
		return nil
	}, memory.New(), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)

	ok := kafkaRecord(0, 1, "ok")
	ok.Topic = ""
	resp, err := handler(t.Context(), kafkaEvent(ok))
	require.NoError(t, err, "a record without topic that succeeds is no problem")
	assert.Empty(t, resp.BatchItemFailures)

	bad := kafkaRecord(0, 2, "fail")
	bad.Topic = ""
	resp, err = handler(t.Context(), kafkaEvent(bad, kafkaRecord(1, 3, "fail")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "have no topic")
	assert.Len(t, resp.BatchItemFailures, 2)
}
