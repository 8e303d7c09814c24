package batch

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
)

// DefaultKafkaKey is the record's place in its topic: topic, partition and
// offset.
const DefaultKafkaKey = "[topic, partition, offset]"

// KafkaEventResponse is the partial batch response of Amazon MSK and
// self-managed Apache Kafka event source mappings, which aws-lambda-go
// does not define. Unlike the other sources' responses, an item identifier
// is an object, the record's topic-partition and offset, as Powertools'
// batch processor reports it too:
//
//	{"batchItemFailures": [{"itemIdentifier": {"partition": "orders-0", "offset": 15}}]}
//
// See https://docs.aws.amazon.com/lambda/latest/dg/kafka-retry-configurations.html.
type KafkaEventResponse struct {
	BatchItemFailures []KafkaBatchItemFailure `json:"batchItemFailures"`
}

// KafkaBatchItemFailure is a failed record of a Kafka batch.
type KafkaBatchItemFailure struct {
	ItemIdentifier KafkaItemIdentifier `json:"itemIdentifier"`
}

// KafkaItemIdentifier names a Kafka record in a partial batch response.
type KafkaItemIdentifier struct {
	// Partition is the record's topic-partition, "<topic>-<partition>",
	// as the event's records are keyed.
	Partition string `json:"partition"`
	// Offset is the record's offset in its partition.
	Offset int64 `json:"offset"`
}

var kafkaSource = source[events.KafkaRecord]{
	name:       "kafka",
	fnName:     "Kafka",
	idName:     "topic",
	defaultKey: DefaultKafkaKey,
	describe: func(r *events.KafkaRecord) meta {
		if r.Topic == "" {
			return meta{ordered: true}
		}
		tp := kafkaPartition(r)
		return meta{id: tp + "@" + strconv.FormatInt(r.Offset, 10), group: tp, ordered: true}
	},
	view: func(r *events.KafkaRecord) any {
		return kafkaView{
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			Timestamp: r.Timestamp, TimestampType: r.TimestampType,
			Key: r.Key, Value: r.Value, Headers: r.Headers,
			DecodedKey: kafkaText(r.Key), DecodedValue: kafkaText(r.Value), JSONValue: kafkaJSON(r.Value),
			DecodedHeaders: kafkaHeaders(r.Headers),
		}
	},
}

// Kafka returns a handler for Amazon MSK and self-managed Apache Kafka
// events, for lambda.Start. It runs fn once per record, made idempotent
// with [idempotency.Wrap] over store. It reports the records that failed
// by topic-partition and offset in a [KafkaEventResponse]. The event source
// mapping must have ReportBatchItemFailures in its FunctionResponseTypes.
//
// The key is [DefaultKafkaKey] unless [idempotency.WithKey] selects
// another. Key expressions search the record as Lambda sends it. They also
// see its value, key and header values decoded (see the package
// documentation). Thus "json_value.order_id" selects the order_id of a
// JSON value. Records run in the event's order within each
// topic-partition. Those that follow a failed record of their
// topic-partition are reported as failed without running.
//
// The handler's error is nil except when a failed record has no topic.
// Kafka returns an error if the options are invalid.
func Kafka(fn func(context.Context, events.KafkaRecord) error, store persistence.Store, opts ...idempotency.BatchOption) (func(context.Context, events.KafkaEvent) (KafkaEventResponse, error), error) {
	p, err := newProcessor(&kafkaSource, fn, store, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, event events.KafkaEvent) (KafkaEventResponse, error) {
		records := kafkaRecords(event)
		failed, _, err := p.run(ctx, records)
		resp := KafkaEventResponse{BatchItemFailures: make([]KafkaBatchItemFailure, len(failed))}
		for i, j := range failed {
			resp.BatchItemFailures[i].ItemIdentifier = KafkaItemIdentifier{Partition: kafkaPartition(&records[j]), Offset: records[j].Offset}
		}
		return resp, err
	}, nil
}

// kafkaPartition returns the record's topic-partition, "<topic>-<partition>",
// the form Lambda keys an event's records by.
func kafkaPartition(r *events.KafkaRecord) string {
	return r.Topic + "-" + strconv.FormatInt(r.Partition, 10)
}

// kafkaRecords returns the event's records in one list: the records of
// each topic-partition in the event's order, the topic-partitions by topic
// and then partition number, so that one event always gives one order.
func kafkaRecords(event events.KafkaEvent) []events.KafkaRecord {
	n := 0
	for _, rs := range event.Records {
		n += len(rs)
	}
	out := make([]events.KafkaRecord, 0, n)
	for _, k := range slices.SortedFunc(maps.Keys(event.Records), compareTopicPartitions) {
		out = append(out, event.Records[k]...)
	}
	return out
}

// compareTopicPartitions orders "<topic>-<partition>" names by topic, then
// by partition number; names of another form by their text.
func compareTopicPartitions(a, b string) int {
	at, ap, aok := splitTopicPartition(a)
	bt, bp, bok := splitTopicPartition(b)
	if !aok || !bok {
		return strings.Compare(a, b)
	}
	return cmp.Or(strings.Compare(at, bt), cmp.Compare(ap, bp))
}

func splitTopicPartition(s string) (topic string, partition int64, ok bool) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return "", 0, false
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 64)
	return s[:i], p, err == nil
}

// kafkaView is what key expressions search for a Kafka record: the record
// as Lambda sends it, under its JSON names, and its decoded parts, under the
// names of Powertools' KafkaEventRecord (Python). The decoded parts are
// decoded only when an expression reads them.
type kafkaView struct {
	Topic         string                              `json:"topic"`
	Partition     int64                               `json:"partition"`
	Offset        int64                               `json:"offset"`
	Timestamp     events.MilliSecondsEpochTime        `json:"timestamp"`
	TimestampType string                              `json:"timestampType"`
	Key           string                              `json:"key,omitempty"`
	Value         string                              `json:"value,omitempty"`
	Headers       []map[string]events.JSONNumberBytes `json:"headers"`

	DecodedKey     kafkaText    `json:"decoded_key"`
	DecodedValue   kafkaText    `json:"decoded_value"`
	JSONValue      kafkaJSON    `json:"json_value"`
	DecodedHeaders kafkaHeaders `json:"decoded_headers"`
}

// kafkaText is a base64 key or value. It encodes as the text it decodes
// to, or as null when it is empty, not base64, or not UTF-8 text.
type kafkaText string

// MarshalJSON implements json.Marshaler.
func (t kafkaText) MarshalJSON() ([]byte, error) {
	b, ok := decodeKafkaText(string(t))
	if !ok {
		return []byte("null"), nil
	}
	return json.Marshal(string(b))
}

// kafkaJSON is a base64 value. It encodes as the JSON value it decodes
// to, or as null when it is empty, not base64, or not JSON.
type kafkaJSON string

// MarshalJSON implements json.Marshaler.
func (j kafkaJSON) MarshalJSON() ([]byte, error) {
	b, ok := decodeKafkaText(string(j))
	if !ok || !json.Valid(b) {
		return []byte("null"), nil
	}
	return b, nil
}

// kafkaHeaders are a record's headers. They encode as an object of each
// header's name and value as text, null where the value is not UTF-8
// text. Of headers with the same name, the last is kept.
type kafkaHeaders []map[string]events.JSONNumberBytes

// MarshalJSON implements json.Marshaler.
func (h kafkaHeaders) MarshalJSON() ([]byte, error) {
	out := make(map[string]*string)
	for _, m := range h {
		for name, v := range m {
			if utf8.Valid(v) {
				s := string(v)
				out[name] = &s
			} else {
				out[name] = nil
			}
		}
	}
	return json.Marshal(out)
}

// decodeKafkaText decodes base64, and reports whether it gave UTF-8 text.
func decodeKafkaText(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || !utf8.Valid(b) {
		return nil, false
	}
	return b, true
}
