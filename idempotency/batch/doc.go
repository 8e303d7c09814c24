// Package batch processes the records of SQS, Kinesis Data Streams,
// DynamoDB Streams and Kafka batches once each. Kafka means Amazon MSK and
// self-managed Apache Kafka. The package reports only the failed records
// to Lambda, so that only they are retried.
//
// Queues and streams deliver at least once. SQS delivers a message again
// when its visibility timeout passes. Lambda retries a whole batch when
// one record fails. [SQS], [Kinesis], [DynamoDB] and [Kafka] build a Lambda
// handler from a function that processes one record. The function is made
// idempotent with [idempotency.Wrap], with one key per record. The handler
// returns the partial batch response Lambda expects. That is
// events.SQSEventResponse, events.KinesisEventResponse,
// events.DynamoDBEventResponse, or [KafkaEventResponse], which
// aws-lambda-go does not define.
//
//	store, _ := dynamodb.New(client, os.Getenv("IDEMPOTENCY_TABLE"))
//	handler, err := batch.SQS(processOrder, store,
//		idempotency.WithKey("powertools_json(body).order_id"),
//		idempotency.WithKeyPrefix("orders"))
//	if err != nil {
//		log.Fatal(err)
//	}
//	lambda.Start(handler)
//
// The event source mapping must list ReportBatchItemFailures in its
// FunctionResponseTypes. In AWS SAM, that is FunctionResponseTypes:
// [ReportBatchItemFailures] on the SQS, Kinesis or DynamoDB event. Without
// it Lambda ignores the response. A batch with failed records then counts
// as a success, and they are not retried. Kafka event source mappings
// offer it among their error handling controls, in provisioned mode
// (https://docs.aws.amazon.com/lambda/latest/dg/kafka-retry-configurations.html).
//
// # Choosing the key
//
// By default a record's key is its delivery identity:
//
//   - the messageId of an SQS message
//   - the eventID of a Kinesis or DynamoDB stream record
//   - the topic, partition and offset of a Kafka record
//
// It stays the same however often Lambda or SQS delivers the record. So
// it protects against every redelivery, and every record has one. But a
// producer may send the same order twice, after a timeout, say. It then
// creates a new message with a new ID, which the default key does not
// recognise. A key taken from the payload, such as
// "powertools_json(body).order_id", recognises both. It is the better
// choice when the payload carries a business identifier. The price is
// failing the records that lack it.
//
// The whole record is never a good key for SQS. Its receiptHandle and
// ApproximateReceiveCount change on each delivery.
//
// A Kafka offset names one record only while its topic lives, in one
// cluster. Offsets start again at 0 when a topic is deleted and created
// again. A function that reads topics of one name from two clusters sees
// each offset twice. A record at an offset seen before is skipped as
// completed until the first one's key expires. A key from the payload
// avoids both.
//
// # Kafka records
//
// Lambda sends a Kafka record's key and value in base64, and its header
// values as arrays of bytes. Key expressions search the record as Lambda
// sends it. So an expression written for Powertools, such as
// powertools_json(powertools_base64(value)).order_id, works unchanged.
// They also see its decoded parts, under the names of Powertools'
// KafkaEventRecord:
//
//   - decoded_value and decoded_key are the value and the key as text.
//     Thus powertools_json(decoded_value).order_id selects the order_id of
//     a JSON value.
//   - json_value is the value as JSON. Thus json_value.order_id selects it
//     too.
//   - decoded_headers is an object of the header values as text. Thus
//     decoded_headers."idempotency-key" selects a header (the last, when
//     several have its name).
//
// A decoded part is null when it is not UTF-8 text. json_value is also
// null when the value is not JSON. A key of a null part alone fails the
// record as a bad record. To key on a binary value, select value itself.
// The parts are decoded only when an expression reads them. The record
// function receives the record as Lambda sent it.
//
// # What happens to each record
//
//   - The function runs and succeeds. The key is completed, and the record
//     succeeds.
//   - The key was completed by an earlier delivery. The function does not
//     run, and the record succeeds (it is skipped). An SQS message received
//     before (ApproximateReceiveCount above 1) is likely such a record, so
//     its key is read first. The read costs a read unit per 4 KB of the
//     record, the reservation's failed write a write unit per KB.
//   - The function returns an error or panics. The record fails, and the
//     key is released, so the redelivered record runs again. An error
//     marked idempotency.Permanent is recorded instead, and so is one
//     classified by idempotency.WithPermanentErrors. The record then fails
//     now and on every redelivery, without running. It does so until it
//     reaches the dead-letter queue or the stream's retry limit. Return nil
//     to drop a record instead.
//   - Another invocation holds the key (in progress). The record fails. It
//     comes back later, and is skipped then if that invocation completed.
//   - No key can be selected from the record (a body that is not JSON, a
//     missing field). The record fails without running, with a log line
//     that names the record. Such a record fails on every delivery. So
//     configure a dead-letter queue to take it out of the way. For a
//     stream, configure its MaximumRetryAttempts and on-failure
//     destination.
//   - The idempotency store fails. The record fails without running.
//
// No record failure fails the whole batch. The store may fail for every
// record. Even then each is reported on its own rather than as an error.
// So records that did succeed are not delivered again. The handler returns
// an error only when a failed record has no identifier. That is an SQS
// message without messageId, a stream record without sequence number, or
// a Kafka record without topic. Lambda cannot retry such a record alone.
// It treats an empty identifier as a failure of the whole batch anyway.
// An empty BatchItemFailures list means the whole batch succeeded.
//
// Each failed record is logged once, at warning or error level. The log
// line has its identifier (item_identifier) and a reason attribute. The
// reason is the outcome of its call (handler_error, in_progress, ...). Or
// it is one of the batch's own ([ReasonBadRecord], [ReasonGroupFailed],
// ...). See [idempotency.WithLogger].
//
// # Order
//
// A standard SQS queue has no order. The other sources keep records in
// order within a group, and so does this package. Once a record of a group
// fails, the later records of that group in the batch are reported as
// failed without running. The groups are these:
//
//   - SQS FIFO queues (an eventSourceARN ending in ".fifo") group by
//     message group, attributes.MessageGroupId. Only the failed group
//     stops. The other groups of the batch go on (Powertools'
//     skip_group_on_error). SQS redelivers the failed group's messages, in
//     order.
//   - Kinesis Data Streams group by partition key, kinesis.partitionKey.
//     It is the unit of order that Lambda keeps with a
//     ParallelizationFactor.
//   - DynamoDB Streams group by item, dynamodb.Keys. The stream keeps each
//     item's changes in order.
//   - Kafka groups by topic-partition, the unit of order of a topic. The
//     records of each topic-partition run in the event's order. The
//     topic-partitions of a batch run by topic, then partition number.
//
// For the streams, Lambda resumes the shard at the lowest reported
// sequence number, whatever else is reported. Every failed record is
// reported, as Powertools does. Lambda resumes a Kafka partition at its
// lowest reported offset. Records after it that succeeded come again, and
// are skipped as completed. Powertools' batch processor runs every stream
// or Kafka record whatever failed before it. So a later change of an item
// can be applied before an earlier one that failed. Here it cannot.
//
// Skipping completed records relies on their keys being remembered until
// they come again. So choose an expiry (idempotency.WithExpiry, one hour
// by default) longer than a failing record can hold the batch up. That is
// longer than the queue's visibility timeout times its maxReceiveCount.
// For a stream's or Kafka's event source mapping, it is longer than its
// MaximumRecordAgeInSeconds, or its retries with MaximumRetryAttempts.
// After the expiry a redelivered record runs again.
//
// # Parallelism
//
// Records run one after another in batch order by default.
// [WithParallelism] runs up to n at a time. It never runs two records of
// one group at a time nor out of order. On standard queues it never runs
// two records with the same key. A duplicate in one batch is thus skipped
// rather than failed as in progress. Records not yet started when the
// invocation's context is done (its deadline) are reported as failed
// without running.
//
// # Keys and options
//
// The handlers take the options of package idempotency, next to their own
// ([WithParallelism]). Package idempotency makes the record function
// idempotent with [idempotency.Wrap]. [idempotency.WithKey] selects the key
// (see above). [idempotency.WithResponseHook] does not apply, since the
// record function has no result.
//
// The key prefix is the one [idempotency.Wrap] would give the record
// function. Set it with [idempotency.WithKeyPrefix] when the function is a
// closure, whose Go name changes with the code around it. A record without
// a key is always a failure here (idempotency.WithRequireKey), never run
// unprotected. The record function receives a context that carries the
// record's key (idempotency.KeyFromContext).
//
// When POWERTOOLS_IDEMPOTENCY_DISABLED is true, records run without
// idempotency, and failures are still reported per record.
package batch
