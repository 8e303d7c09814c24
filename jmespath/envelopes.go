package jmespath

// Envelopes select the payload inside an AWS event, with the names and
// meaning of Powertools for AWS Lambda's built-in envelopes. Use them as
// expressions, or as the start of one:
//
//	jmespath.Compile(jmespath.EnvelopeAPIGatewayREST + ".order_id")
const (
	// EnvelopeAPIGatewayREST is the JSON body of an API Gateway REST API
	// (payload format 1.0) request.
	EnvelopeAPIGatewayREST = "powertools_json(body)"
	// EnvelopeAPIGatewayHTTP is the JSON body of an API Gateway HTTP API
	// (payload format 2.0) or Lambda Function URL request.
	EnvelopeAPIGatewayHTTP = EnvelopeAPIGatewayREST
	// EnvelopeSQS is the list of JSON bodies of the messages of an SQS event.
	EnvelopeSQS = "Records[*].powertools_json(body)"
	// EnvelopeSNS is the JSON message of the first record of an SNS event.
	EnvelopeSNS = "Records[0].Sns.Message | powertools_json(@)"
	// EnvelopeEventBridge is the detail of an EventBridge event.
	EnvelopeEventBridge = "detail"
	// EnvelopeCloudWatchEventsScheduled is the detail of a scheduled
	// CloudWatch Events (EventBridge) event.
	EnvelopeCloudWatchEventsScheduled = EnvelopeEventBridge
	// EnvelopeKinesisDataStream is the list of base64 JSON payloads of the
	// records of a Kinesis Data Streams event.
	EnvelopeKinesisDataStream = "Records[*].kinesis.powertools_json(powertools_base64(data))"
	// EnvelopeCloudWatchLogs is the list of log events of a CloudWatch Logs
	// subscription event (base64, gzip, JSON).
	EnvelopeCloudWatchLogs = "awslogs.powertools_base64_gzip(data) | powertools_json(@).logEvents[*]"
	// EnvelopeS3SNSSQS is the list of S3 event records carried by SNS
	// notifications delivered through SQS.
	EnvelopeS3SNSSQS = "Records[*].powertools_json(body).powertools_json(Message).Records[0]"
	// EnvelopeS3SQS is the list of S3 event records delivered through SQS.
	EnvelopeS3SQS = "Records[*].powertools_json(body).Records[0]"
	// EnvelopeS3SNSKinesisFirehose is the list of S3 event records carried
	// by SNS notifications delivered through Kinesis Data Firehose.
	EnvelopeS3SNSKinesisFirehose = "records[*].powertools_json(powertools_base64(data)).powertools_json(Message).Records[0]"
	// EnvelopeS3KinesisFirehose is the list of S3 event records delivered
	// through Kinesis Data Firehose.
	EnvelopeS3KinesisFirehose = "records[*].powertools_json(powertools_base64(data)).Records[0]"
	// EnvelopeS3EventBridgeSQS is the list of details of S3 EventBridge
	// events delivered through SQS.
	EnvelopeS3EventBridgeSQS = "Records[*].powertools_json(body).detail"
)
