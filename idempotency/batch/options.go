package batch

import (
	"fmt"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
)

// settings are the batch handlers' own options, kept in the configuration
// that every option of package idempotency writes too.
type settings struct {
	parallelism int
}

// WithParallelism processes up to n records at a time. The default, 1,
// processes the records one after another in batch order.
//
// Records that must stay in order are never run concurrently, nor out of
// order. These run one after another in batch order:
//
//   - the records of one SQS FIFO message group
//   - the records of one Kinesis partition key
//   - the records of one DynamoDB item
//   - the records of one Kafka topic-partition
//
// Different groups run in parallel. Lambda itself does the same with the
// message groups of a FIFO queue, and with the partition keys of a shard
// with a ParallelizationFactor. On a standard queue, records with the same
// idempotency key in one batch also run one after the other. The second is
// then skipped as completed instead of failing as in progress.
//
// The record function must be safe for concurrent use when n > 1.
func WithParallelism(n int) idempotency.BatchOption {
	return option{Spec: core.Spec[settings]{Name: "batch.WithParallelism", Set: func(c *core.Config, s *settings) {
		if n < 1 {
			c.Fail(fmt.Errorf("batch.WithParallelism(%d): must be at least 1", n))
			return
		}
		s.parallelism = n
	}}}
}
