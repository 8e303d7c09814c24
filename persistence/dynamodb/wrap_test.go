package dynamodb_test

// Tests of idempotency.Wrap over the DynamoDB store against dynalite and
// DynamoDB Local: what an invocation costs in requests, 50 execution
// environments racing for one key, lost replies, and service failures.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// TestWrapRequestCounts counts the DynamoDB requests of each kind of
// invocation.
func TestWrapRequestCounts(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, store, counter := srv.setup(t)
		h := &paytest.Handler{}
		pay := paytest.Wrap(t, h.Charge, store)
		p := paytest.New()

		first, err := pay(t.Context(), p)
		require.NoError(t, err)
		assert.Equal(t, 2, counter.Calls(), "first call: PutItem and UpdateItem; got %s", counter)
		assert.Equal(t, 1, counter.Calls("PutItem"))
		assert.Equal(t, 1, counter.Calls("UpdateItem"))

		counter.Reset()
		replay, err := pay(t.Context(), p)
		require.NoError(t, err)
		assert.Equal(t, first, replay)
		if srv.ReturnsOldItem {
			// DynamoDB Local returns the existing item with the failed
			// condition, as DynamoDB does: the failed PutItem alone.
			assert.Equal(t, 1, counter.Calls(), "replay: PutItem; got %s", counter)
			assert.Equal(t, 1, counter.Calls("PutItem"))
		} else {
			// dynalite ignores ALL_OLD: the failed PutItem, then a GetItem.
			assert.Equal(t, 2, counter.Calls(), "replay against dynalite: PutItem and GetItem; got %s", counter)
			assert.Equal(t, 1, counter.Calls("GetItem"))

			// Against a client that emulates DynamoDB's ALL_OLD: the failed
			// PutItem alone.
			var allOldCounter dynalite.Counter
			allOldPay := paytest.Wrap(t, h.Charge, newStore(t, srv.withAllOld(srv.NewClient(allOldCounter.Register)), name))
			replay, err = allOldPay(t.Context(), p)
			require.NoError(t, err)
			assert.Equal(t, first, replay)
			assert.Equal(t, 1, allOldCounter.Calls(), "replay with ALL_OLD: PutItem; got %s", &allOldCounter)
		}

		// A handler error releases the key: PutItem and DeleteItem.
		declined := errors.New("card declined")
		failing := &paytest.Handler{Err: declined}
		payFailing := paytest.Wrap(t, failing.Charge, store)
		counter.Reset()
		_, err = payFailing(t.Context(), paytest.New())
		require.Same(t, declined, err, "the handler's error is returned unchanged")
		assert.Equal(t, 2, counter.Calls(), "handler error: PutItem and DeleteItem; got %s", counter)
		assert.Equal(t, 1, counter.Calls("DeleteItem"))

		assert.Equal(t, int32(1), h.Runs.Load(), "the handler ran once for p")
		assert.Equal(t, counter.Calls(), counter.Attempts(), "no retries")
	})
}

// TestWrapLocalCache: with memory.NewCache in front of the store, a retry
// that reaches the same execution environment costs no request at all.
func TestWrapLocalCache(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, counter := srv.setup(t)
		h := &paytest.Handler{}
		pay := paytest.Wrap(t, h.Charge, memory.NewCache(store, 16))
		p := paytest.New()

		first, err := pay(t.Context(), p)
		require.NoError(t, err)
		assert.Equal(t, 2, counter.Calls(), "first call: PutItem and UpdateItem; got %s", counter)

		counter.Reset()
		replay, err := pay(t.Context(), p)
		require.NoError(t, err)
		assert.Equal(t, first, replay)
		assert.Zero(t, counter.Calls(), "cached replay; got %s", counter)
		assert.Equal(t, int32(1), h.Runs.Load())

		// Another key still goes to DynamoDB.
		_, err = pay(t.Context(), paytest.New())
		require.NoError(t, err)
		assert.Equal(t, 2, counter.Calls(), "a new key: PutItem and UpdateItem; got %s", counter)
	})
}

// TestWrapConcurrentEnvironments: 50 Lambda execution environments, each
// with its own SDK client and its own wrapped handler, receive the same
// event at once. Exactly one runs the handler; while it runs, the others get
// *InProgressError; once it has finished, every retry gets its result.
func TestWrapConcurrentEnvironments(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		const environments = 50
		name, _, _ := srv.setup(t)
		p := paytest.New()

		var (
			runs   atomic.Int32
			others sync.WaitGroup // the callers that did not run the handler
		)
		// Bounds the wait below if the handler wrongly runs twice.
		hold, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		others.Add(environments - 1)
		othersDone := make(chan struct{})
		go func() { others.Wait(); close(othersDone) }()
		slowCharge := func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
			runs.Add(1)
			// Hold the key until every other environment has had its answer, so
			// that all of them find it in progress.
			select {
			case <-othersDone:
			case <-hold.Done():
				return paytest.Charge{}, errors.New("the other environments did not all answer (is the handler running twice?)")
			}
			return paytest.Charge{ChargeID: "ch_" + p.OrderID, Amount: p.Amount}, nil
		}

		type answer struct {
			out paytest.Charge
			err error
		}
		call := func(n int, onError func()) []answer {
			answers := make([]answer, n)
			var wg sync.WaitGroup
			for i := range n {
				// Each environment: its own client, store and wrapped handler.
				pay := paytest.Wrap(t, slowCharge, newStore(t, srv.NewClient(), name))
				wg.Go(func() {
					out, err := pay(t.Context(), p)
					answers[i] = answer{out, err}
					if err != nil {
						onError()
					}
				})
			}
			wg.Wait()
			return answers
		}

		var ok, inProgress int
		for i, a := range call(environments, others.Done) {
			var ipe *idempotency.InProgressError
			switch {
			case a.err == nil:
				ok++
				assert.Equal(t, paytest.Charge{ChargeID: "ch_" + p.OrderID, Amount: p.Amount}, a.out)
			case errors.As(a.err, &ipe):
				inProgress++
				assert.False(t, ipe.Until.IsZero(), "InProgressError.Until")
			default:
				t.Errorf("environment %d: %v", i, a.err)
			}
		}
		require.Equal(t, int32(1), runs.Load(), "exactly one handler run")
		require.Equal(t, 1, ok)
		require.Equal(t, environments-1, inProgress)

		// Retries after completion all get the stored result.
		for i, a := range call(environments, func() {}) {
			require.NoError(t, a.err, "retry %d", i)
			assert.Equal(t, paytest.Charge{ChargeID: "ch_" + p.OrderID, Amount: p.Amount}, a.out)
		}
		require.Equal(t, int32(1), runs.Load(), "still exactly one handler run")
	})
}

// TestWrapLostReplies: a write reaches DynamoDB but its reply is lost, and
// the SDK retries it. The handler still runs exactly once.
func TestWrapLostReplies(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, _, _ := srv.setup(t)
		for _, allOld := range srv.allOldModes() {
			newPay := func(t *testing.T, h *paytest.Handler) (func(context.Context, paytest.Payment) (paytest.Charge, error), *dynalite.Faults, *dynalite.Counter) {
				faults := &dynalite.Faults{}
				counter := &dynalite.Counter{}
				var client dynamodb.Client = srv.NewClient(faults.Register, counter.Register)
				if allOld {
					client = srv.withAllOld(client)
				}
				return paytest.Wrap(t, h.Charge, newStore(t, client, name)), faults, counter
			}

			t.Run(fmt.Sprintf("PutItem/allOld=%v", allOld), func(t *testing.T) {
				h := &paytest.Handler{}
				pay, faults, counter := newPay(t, h)
				p := paytest.New()
				faults.LoseReply("PutItem", 1)
				out, err := pay(t.Context(), p)
				// The retried PutItem finds the reservation it made itself and
				// recognises it by its owner token.
				require.NoError(t, err, "not *InProgressError to itself")
				require.Equal(t, int32(1), h.Runs.Load())
				require.Equal(t, 1, faults.Fired(dynalite.LostReply))
				require.Equal(t, 2, counter.Attempts("PutItem"))

				again, err := pay(t.Context(), p)
				require.NoError(t, err)
				require.Equal(t, out, again)
				require.Equal(t, int32(1), h.Runs.Load())
			})

			t.Run(fmt.Sprintf("UpdateItem/allOld=%v", allOld), func(t *testing.T) {
				h := &paytest.Handler{}
				pay, faults, counter := newPay(t, h)
				p := paytest.New()
				faults.LoseReply("UpdateItem", 1)
				out, err := pay(t.Context(), p)
				require.NoError(t, err)
				require.Equal(t, 1, faults.Fired(dynalite.LostReply))
				require.Equal(t, 2, counter.Attempts("UpdateItem"), "the retried UpdateItem succeeds")

				// Another environment gets the stored result.
				other := &paytest.Handler{}
				otherPay, _, _ := newPay(t, other)
				again, err := otherPay(t.Context(), p)
				require.NoError(t, err)
				require.Equal(t, out, again)
				require.Equal(t, int32(1), h.Runs.Load())
				require.Zero(t, other.Runs.Load())
			})
		}
	})
}

// TestWrapServiceFailures: when DynamoDB cannot be reached, throttles, or
// the table does not exist, the call fails with *idempotency.StoreError, the
// handler does not run, and the key is not left locked: once the fault is
// gone, the same event runs.
func TestWrapServiceFailures(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthyStore, _ := srv.setup(t)

		// afterwards checks that the key is free: the same payment runs on a
		// healthy client.
		afterwards := func(t *testing.T, p paytest.Payment) {
			t.Helper()
			h := &paytest.Handler{}
			_, err := paytest.Wrap(t, h.Charge, healthyStore)(t.Context(), p)
			require.NoError(t, err)
			require.Equal(t, int32(1), h.Runs.Load(), "the key was not left locked")
		}
		requireStoreError := func(t *testing.T, err error) *idempotency.StoreError {
			t.Helper()
			var storeErr *idempotency.StoreError
			require.ErrorAs(t, err, &storeErr)
			require.ErrorIs(t, err, idempotency.ErrStore)
			require.NotErrorIs(t, err, idempotency.ErrInProgress)
			return storeErr
		}

		for _, kind := range []dynalite.FaultKind{dynalite.Throttled, dynalite.Refused} {
			t.Run(kind.String(), func(t *testing.T) {
				faults := &dynalite.Faults{}
				h := &paytest.Handler{}
				pay := paytest.Wrap(t, h.Charge, newStore(t, srv.NewClient(faults.Register), name))
				p := paytest.New()
				faults.Add("", kind, -1)
				_, err := pay(t.Context(), p)
				storeErr := requireStoreError(t, err)
				require.Equal(t, "put", storeErr.Op)
				if kind == dynalite.Throttled {
					var throttled *types.ProvisionedThroughputExceededException
					require.ErrorAs(t, err, &throttled)
				}
				require.Zero(t, h.Runs.Load(), "the handler did not run")

				// The fault goes away: the same environment runs the event.
				faults.Clear()
				_, err = pay(t.Context(), p)
				require.NoError(t, err)
				require.Equal(t, int32(1), h.Runs.Load())
			})
		}

		t.Run("ReservationLandedButRetriesThrottled", func(t *testing.T) {
			// The first PutItem is applied but its reply lost; the SDK's
			// retries are throttled. The reservation exists, the caller gets
			// a *StoreError, and the key must still not stay locked.
			faults := &dynalite.Faults{}
			h := &paytest.Handler{}
			pay := paytest.Wrap(t, h.Charge, newStore(t, srv.NewClient(faults.Register), name))
			p := paytest.New()
			faults.LoseReply("PutItem", 1)
			faults.Throttle("PutItem", -1)
			_, err := pay(t.Context(), p)
			requireStoreError(t, err)
			require.Zero(t, h.Runs.Load())
			require.Equal(t, 1, faults.Fired(dynalite.LostReply))
			afterwards(t, p)
		})

		t.Run("ServerDown", func(t *testing.T) {
			client := closedClient(t)
			h := &paytest.Handler{}
			p := paytest.New()
			_, err := paytest.Wrap(t, h.Charge, newStore(t, client, name))(t.Context(), p)
			requireStoreError(t, err)
			require.ErrorContains(t, err, "connection refused")
			require.Zero(t, h.Runs.Load())
			afterwards(t, p)
		})

		t.Run("MissingTable", func(t *testing.T) {
			h := &paytest.Handler{}
			p := paytest.New()
			_, err := paytest.Wrap(t, h.Charge, newStore(t, srv.NewClient(), "no-such-table-"+rand.Text()))(t.Context(), p)
			requireStoreError(t, err)
			var missing *types.ResourceNotFoundException
			require.ErrorAs(t, err, &missing)
			require.Zero(t, h.Runs.Load())
			afterwards(t, p)
		})
	})
}

// TestWrapResponseTooLarge: a response that does not fit in an item even
// compressed completes the key without it; the handler does not run again,
// and retries get *idempotency.ResponseTooLargeError.
func TestWrapResponseTooLarge(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		var runs atomic.Int32
		big := func(ctx context.Context, p paytest.Payment) ([]byte, error) {
			runs.Add(1)
			return randomBytes(500 << 10), nil // JSON-encoded as base64: ~667 KB, incompressible
		}
		// The completion encodes, compresses and sends ~1 MB, twice on
		// dynalite: a loaded machine with the race detector can take
		// longer than the default final write timeout.
		pay, err := idempotency.Wrap(big, store, idempotency.WithKey("order_id"),
			idempotency.WithFinalWriteTimeout(time.Minute), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		p := paytest.New()
		out, err := pay(t.Context(), p)
		require.NoError(t, err, "the first call returns its result")
		require.Len(t, out, 500<<10)

		_, err = pay(t.Context(), p)
		var tooLarge *idempotency.ResponseTooLargeError
		require.ErrorAs(t, err, &tooLarge)
		require.Equal(t, int32(1), runs.Load(), "the side effect did not run again")
	})
}

// TestWrapLargeRecordedError: a permanent error whose message alone is
// larger than an item is recorded cut short, so the key completes and
// retries replay it instead of running the handler again.
func TestWrapLargeRecordedError(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		declined := errors.New(strings.Repeat("declined ", 60<<10)) // 540 KB
		h := &paytest.Handler{Err: idempotency.Permanent(declined)}
		pay := paytest.Wrap(t, h.Charge, store, idempotency.WithLogger(slog.New(slog.DiscardHandler)))
		p := paytest.New()
		_, err := pay(t.Context(), p)
		require.ErrorIs(t, err, declined, "the first call returns the handler's own error")

		_, err = pay(t.Context(), p)
		var stored *idempotency.RecordedError
		require.ErrorAs(t, err, &stored, "the error was recorded")
		assert.Len(t, stored.Message, 8<<10, "cut to 8 KiB")
		assert.True(t, strings.HasPrefix(stored.Message, "declined declined"))
		assert.Equal(t, int32(1), h.Runs.Load(), "the handler did not run again")
	})
}

// BenchmarkWrapDynalite measures invocations of a wrapped handler against
// dynalite on this machine: a first call (PutItem, UpdateItem) and a replay
// (PutItem, GetItem: dynalite ignores ALL_OLD), next to a plain GetItem on
// the same server in the same run, the floor of one round trip. It reports
// the median (p50-ns/op) and 99th percentile (p99-ns/op) besides ns/op.
//
//	go test -run '^$' -bench WrapDynalite -benchtime 2000x ./persistence/dynamodb/
func BenchmarkWrapDynalite(b *testing.B) { benchmarkWrap(b, server{dynamotest.Dynalite.Shared(b)}) }

// BenchmarkWrapDynamoDBLocal is BenchmarkWrapDynalite against DynamoDB
// Local, where a replay is the failed PutItem alone (ALL_OLD).
func BenchmarkWrapDynamoDBLocal(b *testing.B) {
	benchmarkWrap(b, server{dynamotest.DynamoDBLocal.Shared(b)})
}

func benchmarkWrap(b *testing.B, srv server) {
	name, store, _ := srv.setup(b)
	client := srv.NewClient()
	h := &paytest.Handler{}
	pay := paytest.Wrap(b, h.Charge, store)
	done := paytest.New()
	if _, err := pay(b.Context(), done); err != nil {
		b.Fatal(err)
	}
	// A plain item of the same kind to read.
	rec := completed(inProgress(wholeSecond()), []byte(`{"charge_id":"ch_1","amount":4200}`))
	benchGetItem(b, store, client, name, rec, wholeSecond())
	b.Run("FirstCall", func(b *testing.B) {
		var p paytest.Payment
		measure(b, func() {
			if _, err := pay(b.Context(), p); err != nil {
				b.Fatal(err)
			}
		}, func() { p = paytest.New() })
	})
	b.Run("Replay", func(b *testing.B) {
		measure(b, func() {
			if _, err := pay(b.Context(), done); err != nil {
				b.Fatal(err)
			}
		}, nil)
	})
}

// TestConcurrentReplays: calls of a completed key that arrive together in
// one process all get its result, not *InProgressError: one reads the
// record, and the others wait for that answer.
func TestConcurrentReplays(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		for _, n := range []int{10, 200} {
			h := &paytest.Handler{}
			pay := paytest.Wrap(t, h.Charge, store)
			p := paytest.New()
			first, err := pay(t.Context(), p)
			require.NoError(t, err)
			var wg sync.WaitGroup
			errs, got := make([]error, n), make([]paytest.Charge, n)
			for i := range n {
				wg.Go(func() { got[i], errs[i] = pay(t.Context(), p) })
			}
			wg.Wait()
			for i := range n {
				require.NoError(t, errs[i], "call %d of %d", i, n)
				assert.Equal(t, first, got[i])
			}
			assert.EqualValues(t, 1, h.Runs.Load())
		}
	})
}
