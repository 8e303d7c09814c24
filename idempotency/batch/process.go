package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/canonical"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/jmespath"
	"github.com/retrysafe/retrysafe/persistence"
)

// Reasons a record is reported as failed, the "reason" attribute of its
// log line. The reason may also be the outcome of its call (see
// idempotency.Outcome). That is handler_error, in_progress, held,
// store_error, payload_mismatch or recorded_error.
const (
	// ReasonPanic: the record function panicked. Its key was released.
	ReasonPanic = "panic"
	// ReasonBadRecord: no idempotency key could be selected from the record
	// (a body that is not JSON, a missing field). The function did not run.
	ReasonBadRecord = "bad_record"
	// ReasonGroupFailed: an earlier record of the same ordering group
	// failed in this batch. So this one did not run, to keep the group in
	// order. The group is a FIFO message group, a Kinesis partition key, a
	// DynamoDB item or a Kafka topic-partition.
	ReasonGroupFailed = "group_failed"
	// ReasonNotStarted: the invocation's context was done (its deadline had
	// passed) before the record's turn came.
	ReasonNotStarted = "not_started"
	// ReasonError: any other error, such as one that an
	// idempotency.WithErrorDecoder returned for a replayed error.
	ReasonError = "error"
)

// meta is what the batch needs to know about one record besides its key.
type meta struct {
	id      string // the item identifier Lambda expects in BatchItemFailures
	group   string // the ordering group, when ordered
	ordered bool   // whether later records of the group wait for this one
	// redelivered is set on a record delivered before, whose key is then
	// likely completed: the Guard reads it before it writes.
	redelivered bool
}

// source describes one kind of batch event.
type source[R any] struct {
	name       string // "sqs", "kinesis", "dynamodb", "kafka", in log lines
	fnName     string // the function that builds the handler: "SQS"
	idName     string // what the item identifier is, in messages
	defaultKey string // the key expression without WithKey
	describe   func(*R) meta
	// view, when set, returns what key expressions search instead of the
	// record itself.
	view func(*R) any
}

type status uint8

const (
	processed status = iota + 1 // ran and succeeded
	skipped                     // completed earlier; counts as success
	failed
)

// processor runs the records of batches of one source through the
// Guard.
type processor[R any] struct {
	src         *source[R]
	fn          func(context.Context, R) error
	guard       *idempotency.Guard
	key         *jmespath.Expression // selects a record's key
	validation  *jmespath.Expression // selects its payload, or nil
	laneKey     *jmespath.Expression // groups records by key; nil when sequential
	parallelism int
	logger      *slog.Logger
}

// option is an option of this package. It embeds the kind of package
// idempotency's options it is, nil: its marker method, promoted, makes it
// one, and is never called.
type option struct {
	idempotency.BatchOption
	core.Spec[settings]
}

// emptyResult is what a record's completion stores: the function returns
// no result, and a replay only needs to know that the key completed.
var emptyResult = []byte("{}")

func newProcessor[R any](src *source[R], fn func(context.Context, R) error, store persistence.Store, opts []idempotency.BatchOption) (*processor[R], error) {
	name := "idempotency/batch: " + src.fnName
	if fn == nil {
		return nil, errors.New(name + ": nil record function")
	}
	// One Guard, with the options and the batch's defaults: the record's
	// delivery identity as the key, required, and the prefix of the
	// user's function, so that it stays what Wrap would give fn.
	cfg, err := core.Apply(name, opts)
	if err != nil {
		return nil, err
	}
	cfg.Defaults = core.Defaults{Prefix: core.DefaultPrefix(fn), Key: src.defaultKey, RequireKey: true}
	guard, err := core.NewGuard(store, cfg)
	if err != nil {
		return nil, err
	}
	p := &processor[R]{src: src, fn: fn, guard: guard.(*idempotency.Guard), key: cfg.Key, validation: cfg.Validation,
		parallelism: max(core.Section[settings](cfg).parallelism, 1), logger: cmp.Or(cfg.Logger, slog.Default())}
	if p.key == nil {
		if p.key, err = core.CompileKey(src.defaultKey); err != nil {
			return nil, fmt.Errorf("%s: default key: %w", name, err)
		}
	}
	if p.parallelism > 1 {
		p.laneKey = p.key
	}
	return p, nil
}

// process runs the records and returns the identifiers of the failed ones,
// in batch order. It returns an error only when a failed record has no
// identifier: Lambda cannot retry it alone, and would fail the whole batch
// for an empty identifier anyway.
func (p *processor[R]) process(ctx context.Context, records []R) ([]string, error) {
	failed, metas, err := p.run(ctx, records)
	ids := make([]string, len(failed))
	for i, j := range failed {
		ids[i] = metas[j].id
	}
	return ids, err
}

// run is process for sources whose item identifiers are not strings: it
// returns the indexes of the failed records, in batch order, and what it
// knows of each record.
func (p *processor[R]) run(ctx context.Context, records []R) ([]int, []meta, error) {
	metas := make([]meta, len(records))
	for i := range records {
		metas[i] = p.src.describe(&records[i])
	}
	results := make([]status, len(records))
	if p.parallelism == 1 || len(records) < 2 {
		all := make([]int, len(records))
		for i := range all {
			all[i] = i
		}
		p.runLane(ctx, records, metas, results, all)
	} else {
		p.runParallel(ctx, records, metas, results)
	}

	failedIdxs := make([]int, 0, len(records))
	var counts [failed + 1]int
	missing := 0
	for i, st := range results {
		if st != processed && st != skipped {
			// Also a record whose run never finished (the function called
			// runtime.Goexit): it must come again.
			st = failed
		}
		counts[st]++
		if st == failed {
			failedIdxs = append(failedIdxs, i)
			if metas[i].id == "" {
				missing++
			}
		}
	}
	level := slog.LevelDebug
	if counts[failed] > 0 {
		level = slog.LevelInfo
	}
	p.logger.LogAttrs(ctx, level, "idempotency/batch: batch done",
		slog.String("source", p.src.name), slog.Int("records", len(records)),
		slog.Int("processed", counts[processed]), slog.Int("skipped", counts[skipped]), slog.Int("failed", counts[failed]))
	if missing > 0 {
		return failedIdxs, metas, fmt.Errorf("idempotency/batch: %d failed %s records have no %s, so Lambda cannot retry them alone; failing the whole batch",
			missing, p.src.name, p.src.idName)
	}
	return failedIdxs, metas, nil
}

// runParallel runs lanes of records on up to p.parallelism goroutines.
// Each lane runs in batch order on one goroutine: an ordering group, the
// records of a standard queue that share a key, or a single record.
func (p *processor[R]) runParallel(ctx context.Context, records []R, metas []meta, results []status) {
	lanes := p.lanes(records, metas)
	work := make(chan []int)
	var wg sync.WaitGroup
	for range min(p.parallelism, len(lanes)) {
		wg.Go(func() {
			for lane := range work {
				p.runLane(ctx, records, metas, results, lane)
			}
		})
	}
	for _, lane := range lanes {
		work <- lane
	}
	close(work)
	wg.Wait()
}

// lanes partitions the record indices into lanes, in order of first
// appearance, each lane in batch order.
func (p *processor[R]) lanes(records []R, metas []meta) [][]int {
	var lanes [][]int
	index := make(map[string]int)
	for i := range records {
		var name string
		switch {
		case metas[i].ordered:
			name = "g" + metas[i].group
		case p.laneKey != nil:
			if k, ok := p.keyMaterial(&records[i]); ok {
				name = "k" + k
			}
		}
		if name == "" {
			lanes = append(lanes, []int{i})
			continue
		}
		if j, ok := index[name]; ok {
			lanes[j] = append(lanes[j], i)
			continue
		}
		index[name] = len(lanes)
		lanes = append(lanes, []int{i})
	}
	return lanes
}

// keyMaterial returns the canonical form of the record's selected key, or
// false when it has none (the record then fails on its own lane).
func (p *processor[R]) keyMaterial(rec *R) (string, bool) {
	v, err := p.laneKey.SearchValue(p.searched(rec))
	if err != nil || v == nil {
		return "", false
	}
	b, err := canonical.Append(nil, v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// runLane runs the records at idxs in order. Once an ordered record fails,
// the later records of its group fail without running.
func (p *processor[R]) runLane(ctx context.Context, records []R, metas []meta, results []status, idxs []int) {
	var failedGroups map[string]string // group -> identifier of its failed record
	for _, i := range idxs {
		m := metas[i]
		if m.ordered {
			if first, ok := failedGroups[m.group]; ok {
				results[i] = failed
				p.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency/batch: not running the record: an earlier record of its group failed in this batch; reporting it as failed to keep the group in order",
					p.recordAttrs(m, ReasonGroupFailed, nil, slog.String("failed_item_identifier", first))...)
				continue
			}
		}
		results[i] = p.one(ctx, records[i], m)
		if results[i] == failed && m.ordered {
			if failedGroups == nil {
				failedGroups = make(map[string]string)
			}
			failedGroups[m.group] = m.id
		}
	}
}

// one runs a single record through the Guard.
func (p *processor[R]) one(ctx context.Context, rec R, m meta) (res status) {
	if ctx.Err() != nil {
		return p.fail(ctx, slog.LevelWarn, "idempotency/batch: the invocation's context is done; not running the record", m, ReasonNotStarted, context.Cause(ctx))
	}
	defer func() {
		if v := recover(); v != nil {
			// The core has already released the key on its way up.
			res = p.fail(ctx, slog.LevelError, "idempotency/batch: the record function panicked; its key was released", m, ReasonPanic,
				fmt.Errorf("panic: %v", v), slog.String("stack", string(debug.Stack())))
		}
	}()
	key, payload, err := p.derive(rec)
	if err != nil {
		return p.fail(ctx, slog.LevelError, "idempotency/batch: bad record: no idempotency key could be selected from it; the function did not run (the record will be redelivered, and reach the dead-letter queue or the retry limit if it keeps failing)",
			m, ReasonBadRecord, err, slog.String("key_expression", p.key.String()))
	}
	if m.redelivered {
		ctx = core.WithLikelyRetry(ctx)
	}
	r, err := p.guard.Do(ctx, key, payload, func(ctx context.Context) ([]byte, error) {
		return emptyResult, p.fn(ctx, rec)
	})
	switch r.Outcome {
	case idempotency.OutcomeNew, idempotency.OutcomeHandlerError, idempotency.OutcomeFencedOut,
		idempotency.OutcomeCompletionFailed, idempotency.OutcomeNotCommitted:
		if err == nil {
			return processed
		}
		// The function's own error, and the core released the key or
		// recorded it; or its writes did not commit.
		return p.fail(ctx, slog.LevelError, "idempotency/batch: the record function failed", m, string(idempotency.OutcomeHandlerError), err)
	case idempotency.OutcomeReplay:
		// The key completed: the record was processed, whatever its
		// stored response says.
		p.logger.LogAttrs(ctx, slog.LevelDebug, "idempotency/batch: record already processed; skipping it",
			slog.String("source", p.src.name), slog.String("item_identifier", m.id))
		return skipped
	case idempotency.OutcomeInProgress:
		return p.fail(ctx, slog.LevelWarn, "idempotency/batch: the record's key is in progress in another invocation; it will be redelivered", m, string(r.Outcome), err)
	case idempotency.OutcomeHeld:
		return p.fail(ctx, slog.LevelError, "idempotency/batch: the record's key is held until an operator releases it, after an invocation that ran it ended without an outcome; the function did not run", m, string(r.Outcome), err)
	case idempotency.OutcomeStoreError:
		return p.fail(ctx, slog.LevelError, "idempotency/batch: the idempotency store failed; the function did not run", m, string(r.Outcome), err)
	case idempotency.OutcomePayloadMismatch:
		return p.fail(ctx, slog.LevelError, "idempotency/batch: the record's key was already used with a different payload; the function did not run", m, string(r.Outcome), err)
	case idempotency.OutcomeRecordedError:
		return p.fail(ctx, slog.LevelWarn, "idempotency/batch: the record's key completed with a permanent error, which is replayed; the function did not run", m, string(r.Outcome), err)
	}
	return p.fail(ctx, slog.LevelError, "idempotency/batch: the record failed; the function did not run", m, ReasonError, err)
}

// derive returns the key material of rec and that of its payload (empty
// without payload validation), which Guard.Do hashes as idempotency.Wrap
// does, or why rec has no key, as an *idempotency.KeyError.
func (p *processor[R]) derive(rec R) (key, payload string, err error) {
	in := p.searched(&rec)
	material, noKey, err := core.AppendMaterial(nil, p.key, in)
	switch {
	case err != nil:
		return "", "", &idempotency.KeyError{Expression: p.key.String(), Err: err}
	case noKey:
		return "", "", &idempotency.KeyError{Expression: p.key.String()}
	}
	if p.validation != nil {
		v, _, err := core.AppendMaterial(nil, p.validation, in)
		if err != nil {
			return "", "", &idempotency.KeyError{Expression: p.validation.String(), Err: fmt.Errorf("payload validation: %w", err)}
		}
		payload = string(v)
	}
	return string(material), payload, nil
}

// searched returns what the key expressions search for rec: the source's
// view of it, or the record itself.
func (p *processor[R]) searched(rec *R) any {
	if p.src.view != nil {
		return p.src.view(rec)
	}
	return *rec
}

// fail logs why the record failed and returns failed.
func (p *processor[R]) fail(ctx context.Context, level slog.Level, msg string, m meta, reason string, err error, extra ...slog.Attr) status {
	p.logger.LogAttrs(ctx, level, msg, p.recordAttrs(m, reason, err, extra...)...)
	return failed
}

func (p *processor[R]) recordAttrs(m meta, reason string, err error, extra ...slog.Attr) []slog.Attr {
	attrs := make([]slog.Attr, 0, 5+len(extra))
	attrs = append(attrs, slog.String("source", p.src.name), slog.String("item_identifier", m.id), slog.String("reason", reason))
	if m.ordered {
		attrs = append(attrs, slog.String("group", m.group))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	return append(attrs, extra...)
}
