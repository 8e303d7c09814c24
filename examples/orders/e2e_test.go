package main

// End-to-end tests: the orders binary under the Lambda Runtime Interface
// Emulator, as several execution environments, against dynalite, fed SQS
// events the way an SQS event source mapping delivers them (BatchSize 10,
// ReportBatchItemFailures, maxReceiveCount 5, as in template.yaml). They
// skip without Node.js, dynalite or the emulator, unless
// IDEMPOTENCY_REQUIRE_INTEGRATION=1.
//
// E2E_SEED replays the random choices of a run (messages, batches,
// environments, duplicate deliveries): each test logs the seed it used.
// How the invocations interleave still depends on timing.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/orders/order"
	"github.com/retrysafe/retrysafe/examples/orders/order/ordertest"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/rie"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// The queue as template.yaml configures it and its event source mapping
// delivers it.
const (
	// maxBatch is the event source mapping's BatchSize.
	maxBatch = 10
	// maxReceiveCount is the queue's redrive policy: a message received
	// that many times, and failed each time, goes to the dead-letter queue.
	maxReceiveCount = 5
	fifoQueueARN    = "arn:aws:sqs:us-east-1:123456789012:OrdersQueue.fifo"
)

func TestEndToEnd(t *testing.T) {
	dynalite.Shared(t) // skips before building when there is no server
	bootstrap, err := rie.BuildFunction(t.Context(), "github.com/retrysafe/retrysafe/examples/orders", t.TempDir())
	require.NoError(t, err)
	t.Run("Standard", func(t *testing.T) { testStandardQueue(t, bootstrap) })
	t.Run("FIFO", func(t *testing.T) { testFIFOQueue(t, bootstrap) })
}

// testStandardQueue: 30 orders in overlapping batches (each shares 3
// orders with the next, re-sent by the producer as new messages, and one
// order of each batch is sent twice in it), each batch delivered twice to
// three execution environments: about half at once to two environments
// (its visibility timeout passed while the first delivery ran), the others
// again later, while other batches run. A message without an order ID is
// among them. Failed messages come back, as SQS sends them after the
// visibility timeout, until none fail or they reach the dead-letter queue.
//
// Each order is written once, by one of its messages; every response
// names only messages of its batch, once each; the message without an
// order fails on each delivery and ends in the dead-letter queue, alone.
func testStandardQueue(t *testing.T, bootstrap string) {
	const orders, window, step, environments = 30, 8, 5, 3
	rng := newRand(t)
	s := startStack(t, bootstrap, environments)
	q := newQueue(ordertest.QueueARN)

	var batches [][]string
	for start := 0; start < orders; start += step {
		var ids []string
		for j := range window {
			ids = append(ids, q.sendOrder(rng, orderID((start+j)%orders), "c-1"))
		}
		ids = append(ids, q.sendOrder(rng, orderID((start+rng.IntN(window))%orders), "c-1"))
		batches = append(batches, ids)
	}
	bad := q.send(rng, "", "", `{"customer": "c-1", "amount": 4200}`)
	b := rng.IntN(len(batches))
	batches[b] = append(batches[b], bad)
	for _, ids := range batches {
		require.LessOrEqual(t, len(ids), maxBatch)
		// A standard queue keeps no order.
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}

	// Each batch is delivered twice: to two environments at once, or the
	// second time later, after its first delivery, among the deliveries
	// of other batches.
	type job struct {
		batch        int
		environments []int
	}
	var jobs, later []job
	for b := range batches {
		i := rng.IntN(environments)
		if rng.IntN(2) == 0 {
			jobs = append(jobs, job{b, []int{i, (i + 1 + rng.IntN(environments-1)) % environments}})
		} else {
			jobs = append(jobs, job{b, []int{i}})
			later = append(later, job{b, []int{rng.IntN(environments)}})
		}
	}
	for _, j := range later {
		first := slices.IndexFunc(jobs, func(o job) bool { return o.batch == j.batch })
		jobs = slices.Insert(jobs, first+1+rng.IntN(len(jobs)-first), j)
	}

	started := time.Now()
	// As many pollers as environments, so that batches also overlap in
	// time.
	ch := make(chan job)
	var wg sync.WaitGroup
	for range environments {
		wg.Go(func() {
			for j := range ch {
				var at sync.WaitGroup
				for _, i := range j.environments {
					at.Go(func() { s.deliver(t, q, i, batches[j.batch]) })
				}
				at.Wait()
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()

	// Redeliveries: what failed and was not deleted by another delivery
	// comes back in new batches, at once to the environments.
	rounds := 0
	for ; ; rounds++ {
		pending := q.pending()
		if len(pending) == 0 {
			break
		}
		require.Less(t, rounds, maxReceiveCount, "messages still pending: %v", pending)
		rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
		var wg sync.WaitGroup
		for ids := range slices.Chunk(pending, maxBatch) {
			i := rng.IntN(environments)
			wg.Go(func() { s.deliver(t, q, i, ids) })
		}
		wg.Wait()
	}
	elapsed := time.Since(started)

	st := q.stats()
	t.Logf("%d orders in %d messages, %d invocations of %d environments in %v (%d redelivery rounds): %d failures of messages with an order (in progress elsewhere), at most %d receives of one",
		orders, len(q.order), st.invocations, environments, elapsed.Round(time.Millisecond), rounds, st.orderFailures, st.maxOrderReceives)

	assert.Equal(t, []string{bad}, q.dlq, "only the message without an order reaches the dead-letter queue")
	assert.Equal(t, maxReceiveCount, q.messages[bad].receives)
	assert.Equal(t, maxReceiveCount, q.messages[bad].failures, "the message without an order fails on each delivery")
	s.checkOnce(t, q, orders)
}

// testFIFOQueue: a FIFO queue of four message groups (customers) of six
// orders each, plus three orders re-sent by the producer later in their
// group, after the queue's deduplication window (so as new messages). Two
// pollers receive batches as a FIFO queue gives them: from the head of
// each group, a group at a time in flight. About half the batches are
// delivered twice at once to the two environments, as SQS does when the
// visibility timeout passes while the first delivery runs; a message
// there in progress elsewhere fails, and so do the messages of its group
// after it.
//
// Each order is written once; each response fails, within a group, only
// a suffix of its messages; each group's orders are processed in the
// group's order.
func testFIFOQueue(t *testing.T, bootstrap string) {
	const groups, perGroup, resends, environments, pollers = 4, 6, 3, 2, 2
	rng := newRand(t)
	s := startStack(t, bootstrap, environments)
	q := newQueue(fifoQueueARN)

	want := map[string][]string{}      // group -> its orders, in order
	sequences := map[string][]string{} // group -> the orders of its messages, in order
	for g := range groups {
		group := fmt.Sprintf("c-%d", g)
		for k := range perGroup {
			want[group] = append(want[group], orderID(g*perGroup+k))
		}
		sequences[group] = slices.Clone(want[group])
	}
	for range resends {
		group := fmt.Sprintf("c-%d", rng.IntN(groups))
		seq := sequences[group]
		first := rng.IntN(len(seq))
		sequences[group] = slices.Insert(seq, first+1+rng.IntN(len(seq)-first), seq[first])
	}
	for g := range groups {
		group := fmt.Sprintf("c-%d", g)
		for _, order := range sequences[group] {
			q.sendOrder(rng, order, group)
		}
	}

	started := time.Now()
	var wg sync.WaitGroup
	for p := range pollers {
		prng := rand.New(rand.NewPCG(rng.Uint64(), uint64(p)))
		wg.Go(func() {
			for {
				ids, wait, done := q.receiveFIFO(prng)
				if done {
					return
				}
				if ids == nil {
					<-wait
					continue
				}
				envs := []int{prng.IntN(environments)}
				if prng.IntN(2) == 0 {
					envs = append(envs, (envs[0]+1)%environments)
				}
				results := make([]map[string]bool, len(envs))
				var at sync.WaitGroup
				for n, i := range envs {
					at.Go(func() { results[n] = s.deliver(t, q, i, ids) })
				}
				at.Wait()
				if !q.settleFIFO(t, ids, results) {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(started)

	st := q.stats()
	t.Logf("%d orders in %d messages of %d groups, %d invocations of %d environments in %v: %d failures (in progress elsewhere, or after such a message in its group), at most %d receives of one",
		groups*perGroup, len(q.order), groups, st.invocations, environments, elapsed.Round(time.Millisecond), st.orderFailures, st.maxOrderReceives)
	for group, ids := range q.groups {
		assert.Empty(t, ids, "messages of group %s left in the queue", group)
	}
	items := s.checkOnce(t, q, groups*perGroup)

	// In each group, an order is processed only after the one before it
	// completed, so their processed_at follow the group's order (the
	// environments share the host's clock).
	slices.SortFunc(items, func(a, b order.Processing) int { return a.ProcessedAt.Compare(b.ProcessedAt) })
	got := map[string][]string{}
	for _, it := range items {
		if m := q.messages[it.MessageID]; m != nil {
			got[m.group] = append(got[m.group], it.OrderID)
		}
	}
	assert.Equal(t, want, got, "orders processed out of their group's order")
}

// stack is the example deployed locally: its tables in dynalite and its
// execution environments.
type stack struct {
	*ordertest.Env
	environments []*rie.Instance
}

// startStack creates the tables and starts n execution environments of
// the function, stopped when t ends.
func startStack(t *testing.T, bootstrap string, n int) *stack {
	t.Helper()
	s := &stack{Env: ordertest.Setup(t)}
	cfg := rie.Config{
		Bootstrap:    bootstrap,
		FunctionName: "orders",
		Env: append(s.Srv.Env(),
			order.EnvOrdersTable+"="+s.OrdersTable,
			order.EnvIdempotencyTable+"="+s.IdempotencyTable),
	}
	for range n {
		s.environments = append(s.environments, rie.Start(t, cfg))
	}
	return s
}

// deliver invokes environment i with the messages ids of q, received
// again, as the event source mapping does, and settles them: Lambda
// deletes the messages the response does not name. It returns the
// failed messages: all of them when the invocation failed, which the
// test reports.
func (s *stack) deliver(t *testing.T, q *queue, i int, ids []string) map[string]bool {
	failed := map[string]bool{}
	for _, id := range ids {
		failed[id] = true
	}
	defer func() { q.settle(ids, failed) }()

	payload, err := json.Marshal(events.SQSEvent{Records: q.receive(ids)})
	if !assert.NoError(t, err) {
		return failed
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := s.environments[i].Invoke(ctx, payload)
	if !assert.NoError(t, err) || !assert.NoError(t, out.Err(), "invocation error") {
		return failed
	}
	var resp events.SQSEventResponse
	if !assert.NoError(t, json.Unmarshal(out.Payload, &resp), "not an SQS batch response: %s", out.Payload) {
		return failed
	}
	clear(failed)
	for _, f := range resp.BatchItemFailures {
		assert.Contains(t, ids, f.ItemIdentifier, "a failure that names no message of the batch")
		assert.False(t, failed[f.ItemIdentifier], "%s reported twice", f.ItemIdentifier)
		failed[f.ItemIdentifier] = true
	}
	return failed
}

// checkOnce checks that the orders table holds one item per order, each
// written by one of the order's messages in q, for the given number of
// distinct orders, and returns the items.
func (s *stack) checkOnce(t *testing.T, q *queue, orders int) []order.Processing {
	t.Helper()
	items := s.Items(t)
	perOrder := map[string]int{}
	for _, it := range items {
		perOrder[it.OrderID]++
		m := q.messages[it.MessageID]
		if assert.NotNil(t, m, "item of an unknown message %s", it.MessageID) {
			assert.Equal(t, m.order, it.OrderID, "message %s is not of order %s", it.MessageID, it.OrderID)
		}
	}
	for order, n := range perOrder {
		assert.Equal(t, 1, n, "order %s processed %d times", order, n)
	}
	assert.Len(t, perOrder, orders, "distinct orders processed")
	assert.Len(t, items, orders, "items in the orders table")
	return items
}

// queue is an SQS queue as the tests need it: its messages, their receive
// counts, which ones Lambda deleted, and its dead-letter queue; for a
// FIFO queue, also the messages left in each group, in order, and the
// groups in flight.
type queue struct {
	arn      string
	mu       sync.Mutex
	order    []string // the message IDs, in the order they were sent
	messages map[string]*queued
	dlq      []string
	groups   map[string][]string
	inFlight map[string]bool
	changed  chan struct{} // closed and replaced when a FIFO batch settles
	// invocations counts the deliveries.
	invocations int
}

// queued is a message of a queue.
type queued struct {
	msg      events.SQSMessage
	order    string // "" for a message without an order
	group    string // FIFO only
	receives int
	failures int
	deleted  bool
}

func newQueue(arn string) *queue {
	return &queue{arn: arn, messages: map[string]*queued{}, groups: map[string][]string{}, inFlight: map[string]bool{}, changed: make(chan struct{})}
}

func (q *queue) fifo() bool { return q.arn == fifoQueueARN }

// sendOrder sends a new message with order's body, in group (a FIFO
// queue's message group, the customer), and returns its ID.
func (q *queue) sendOrder(rng *rand.Rand, order, group string) string {
	return q.send(rng, order, group, fmt.Sprintf(`{"order_id": %q, "customer": %q, "amount": %d}`, order, group, 100+rng.IntN(10_000)))
}

// send sends a new message and returns its ID, a new UUID as SQS gives.
func (q *queue) send(rng *rand.Rand, order, group, body string) string {
	id := fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), 0x8000|rng.IntN(1<<14), rng.Uint64()&(1<<48-1))
	m := events.SQSMessage{
		MessageId:      id,
		Body:           body,
		EventSource:    "aws:sqs",
		EventSourceARN: q.arn,
		AWSRegion:      "us-east-1",
		Attributes: map[string]string{
			"SentTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
			"SenderId":      "AROAIWPX5BD2BHG722MW4:producer",
		},
	}
	if q.fifo() {
		m.Attributes["MessageGroupId"] = group
		m.Attributes["MessageDeduplicationId"] = id
		m.Attributes["SequenceNumber"] = strconv.Itoa(18_000_000_000_000_000 + len(q.order))
		q.groups[group] = append(q.groups[group], id)
	}
	q.order = append(q.order, id)
	q.messages[id] = &queued{msg: m, order: order, group: group}
	return id
}

// receive returns the messages ids as a delivery carries them: with their
// receive count, and a receipt handle of their own.
func (q *queue) receive(ids []string) []events.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.invocations++
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	records := make([]events.SQSMessage, len(ids))
	for n, id := range ids {
		m := q.messages[id]
		m.receives++
		r := m.msg
		r.Attributes = maps.Clone(m.msg.Attributes)
		r.Attributes["ApproximateReceiveCount"] = strconv.Itoa(m.receives)
		if _, ok := m.msg.Attributes["ApproximateFirstReceiveTimestamp"]; !ok {
			m.msg.Attributes["ApproximateFirstReceiveTimestamp"] = now
			r.Attributes["ApproximateFirstReceiveTimestamp"] = now
		}
		r.ReceiptHandle = fmt.Sprintf("%s#%d", id, m.receives)
		records[n] = r
	}
	return records
}

// settle records a delivery's outcome: the messages not failed are
// deleted.
func (q *queue) settle(ids []string, failed map[string]bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if failed[id] {
			q.messages[id].failures++
		} else {
			q.messages[id].deleted = true
		}
	}
}

// pending returns the messages of a standard queue that SQS sends again:
// not deleted, not in the dead-letter queue. Those received
// maxReceiveCount times go to the dead-letter queue instead.
func (q *queue) pending() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []string
	for _, id := range q.order {
		m := q.messages[id]
		switch {
		case m.deleted || slices.Contains(q.dlq, id):
		case m.receives >= maxReceiveCount:
			q.dlq = append(q.dlq, id)
		default:
			ids = append(ids, id)
		}
	}
	return ids
}

// receiveFIFO receives a batch from a FIFO queue: the first messages of
// groups that are not in flight, in random group order, in group order
// within a group, up to maxBatch; their groups are then in flight until
// settleFIFO. It returns no messages and a channel to wait on when every
// group with messages is in flight, and done when no message is left.
func (q *queue) receiveFIFO(rng *rand.Rand) (ids []string, wait <-chan struct{}, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	groups := make([]string, 0, len(q.groups))
	left := false
	for g, ids := range q.groups {
		if len(ids) > 0 {
			left = true
			if !q.inFlight[g] {
				groups = append(groups, g)
			}
		}
	}
	if !left {
		return nil, nil, true
	}
	slices.Sort(groups)
	rng.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	for _, g := range groups {
		if len(ids) == maxBatch {
			break
		}
		take := q.groups[g][:min(len(q.groups[g]), maxBatch-len(ids))]
		ids = append(ids, take...)
		q.inFlight[g] = true
	}
	return ids, q.changed, false
}

// settleFIFO settles a FIFO batch after its deliveries (deliver deleted
// the messages that any delivery did not fail), one result each. Each
// result must fail, in each group, a suffix of the group's messages in
// the batch (a failed message stops its group), so that the deleted
// messages are the first of their group. It removes those from their
// group, releases the batch's groups, and returns false after too many
// invocations.
func (q *queue) settleFIFO(t *testing.T, ids []string, results []map[string]bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, failed := range results {
		stopped := map[string]string{}
		for _, id := range ids {
			g := q.messages[id].group
			if first, ok := stopped[g]; ok {
				assert.True(t, failed[id], "%s of group %s succeeded after %s failed", id, g, first)
			} else if failed[id] {
				stopped[g] = id
			}
		}
	}
	var groups []string
	for _, id := range ids {
		if g := q.messages[id].group; !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		left := q.groups[g]
		for len(left) > 0 && q.messages[left[0]].deleted {
			left = left[1:]
		}
		for _, id := range left {
			assert.False(t, q.messages[id].deleted, "%s of group %s deleted, after a message still in the queue", id, g)
		}
		q.groups[g] = left
		delete(q.inFlight, g)
	}
	close(q.changed)
	q.changed = make(chan struct{})
	ok := q.invocations < 100
	assert.True(t, ok, "the FIFO queue is not drained after %d invocations", q.invocations)
	return ok
}

type queueStats struct {
	invocations, orderFailures, maxOrderReceives int
}

func (q *queue) stats() queueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := queueStats{invocations: q.invocations}
	for _, m := range q.messages {
		if m.order != "" {
			st.orderFailures += m.failures
			st.maxOrderReceives = max(st.maxOrderReceives, m.receives)
		}
	}
	return st
}

func orderID(n int) string { return fmt.Sprintf("ord-%04d", n) }

// newRand returns the source of a test's random choices, seeded from
// E2E_SEED or anew, and logs the seed.
func newRand(t *testing.T) *rand.Rand {
	seed := testenv.Seed(t, "E2E_SEED")
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
