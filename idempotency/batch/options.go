package batch

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/retrysafe/retrysafe/idempotency"
)

// An Option configures SQS, Kinesis and DynamoDB. Options are checked when
// the handler is built, so that a bad key expression fails at cold start,
// not on the first batch.
type Option func(*config)

type config struct {
	key         string
	parallelism int
	logger      *slog.Logger
	idempotency []idempotency.Option
	errs        []error
}

func newConfig(opts []Option) (*config, error) {
	c := &config{parallelism: 1}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("idempotency/batch: nil Option")
		}
		opt(c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("idempotency/batch: "+format, args...))
}

// WithKey selects each record's idempotency key with a JMESPath expression
// over the record as aws-lambda-go's events types encode it to JSON (the
// field names of the Lambda event, such as body, messageId, kinesis.data or
// dynamodb.Keys). The Powertools functions work as in idempotency.WithKey:
//
//	powertools_json(body).order_id                       an SQS message's JSON body
//	powertools_json(powertools_base64(kinesis.data)).id  a Kinesis record's JSON data
//	[dynamodb.Keys, dynamodb.NewImage.version.N]         a DynamoDB item's key and version
//
// A DynamoDB stream carries every change of an item: a key made of the
// item's key alone (dynamodb.Keys) would skip its later changes as
// completed. Add what tells the changes apart, such as a version
// attribute, or keep the default.
//
// Without WithKey the key is the record's delivery identity: messageId for
// SQS, eventID for Kinesis and DynamoDB Streams; see the package
// documentation for the trade-off. A record whose expression selects
// nothing, or fails (a body that is not JSON), is a failed record.
//
// Use this option rather than idempotency.WithKey in WithIdempotencyOptions.
func WithKey(expression string) Option {
	return func(c *config) {
		if expression == "" {
			c.fail("WithKey: empty expression")
		}
		c.key = expression
	}
}

// WithParallelism processes up to n records at a time. The default, 1,
// processes the records one after another in batch order.
//
// Records that must stay in order are never run concurrently, nor out of
// order: the records of one SQS FIFO message group, of one Kinesis
// partition key, or of one DynamoDB item run one after another in batch
// order, while different groups run in parallel (as Lambda itself runs
// the message groups of a FIFO queue, or the partition keys of a shard with
// a ParallelizationFactor). On a standard queue, records with the same
// idempotency key in one batch also run one after the other, so that the
// second is skipped as completed instead of failing as in progress.
//
// The record function must be safe for concurrent use when n > 1.
func WithParallelism(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail("WithParallelism(%d): must be at least 1", n)
		}
		c.parallelism = n
	}
}

// WithLogger sets the logger for failed records (one line each, with the
// record's identifier and the reason) and for the idempotency core, unless
// WithIdempotencyOptions sets another one for it. Default slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.fail("WithLogger: nil logger")
		}
		c.logger = logger
	}
}

// WithIdempotencyOptions passes options to idempotency.Wrap, which makes the
// record function idempotent: idempotency.WithKeyPrefix,
// idempotency.WithExpiry, idempotency.WithPayloadValidation,
// idempotency.WithPermanentErrors, idempotency.WithObserver and the others.
// They are applied after the batch's own (the key, its prefix, the logger),
// so they override them. idempotency.WithResponseHook does not apply: the
// record function has no result.
func WithIdempotencyOptions(opts ...idempotency.Option) Option {
	return func(c *config) {
		for _, o := range opts {
			if o == nil {
				c.fail("WithIdempotencyOptions: nil idempotency.Option")
				return
			}
		}
		c.idempotency = append(c.idempotency, opts...)
	}
}
