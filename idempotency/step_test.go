package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// payment runs an order as three steps, charge, ledger and email, each
// counted; fail, when set, fails the call after the step it names.
type payment struct {
	charges, ledgers, emails atomic.Int32
	fail                     func(after string) error
}

func (p *payment) handle(ctx context.Context, o order) (receipt, error) {
	charge, err := idempotency.Step(ctx, "charge", func(ctx context.Context) (string, error) {
		n := p.charges.Add(1)
		return fmt.Sprintf("ch_%s_%d", o.OrderID, n), nil
	})
	if err != nil {
		return receipt{}, err
	}
	if err := p.failAfter("charge"); err != nil {
		return receipt{}, err
	}
	if _, err := idempotency.Step(ctx, "ledger", func(ctx context.Context) (int32, error) {
		return p.ledgers.Add(1), nil
	}); err != nil {
		return receipt{}, err
	}
	if err := p.failAfter("ledger"); err != nil {
		return receipt{}, err
	}
	if _, err := idempotency.Step(ctx, "email", func(ctx context.Context) (struct{}, error) {
		p.emails.Add(1)
		return struct{}{}, nil
	}); err != nil {
		return receipt{}, err
	}
	if err := p.failAfter("email"); err != nil {
		return receipt{}, err
	}
	return receipt{ChargeID: charge, Amount: o.Amount}, nil
}

func (p *payment) failAfter(step string) error {
	if p.fail == nil {
		return nil
	}
	return p.fail(step)
}

func (p *payment) runs() [3]int32 {
	return [3]int32{p.charges.Load(), p.ledgers.Load(), p.emails.Load()}
}

var errAfterCharge = errors.New("the ledger is down")

func TestStepIsNotRunAgainWhenTheCallFailsAfterIt(t *testing.T) {
	p := &payment{}
	failures := 1
	p.fail = func(after string) error {
		if after == "charge" && failures > 0 {
			failures--
			return errAfterCharge
		}
		return nil
	}
	pay := mustWrap(t, p.handle, memory.New())

	_, err := pay(t.Context(), o1)
	require.ErrorIs(t, err, errAfterCharge)
	assert.Equal(t, [3]int32{1, 0, 0}, p.runs())

	got, err := pay(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, "ch_o-1_1", got.ChargeID, "the retry gets the first attempt's charge")
	assert.Equal(t, [3]int32{1, 1, 1}, p.runs(), "the retry resumes after the charge")

	again, err := pay(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, got, again)
	assert.Equal(t, [3]int32{1, 1, 1}, p.runs())
}

// An attempt that died after its first step, and whose reservation
// lapsed, is taken over by a retry that resumes after that step.
func TestTakeoverResumesAfterTheStoredSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &payment{}
		dead := make(chan struct{})
		var killed atomic.Bool
		p.fail = func(after string) error {
			if after == "charge" && !killed.Swap(true) {
				<-dead // the first attempt stops here, killed
			}
			return nil
		}
		pay := mustWrap(t, p.handle, memory.New(), idempotency.WithLogger(discardLogger()))

		first, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		go pay(first, o1) //nolint:errcheck // the attempt never returns before the retry
		synctest.Wait()
		assert.Equal(t, [3]int32{1, 0, 0}, p.runs())

		time.Sleep(2 * time.Second) // the first attempt's reservation lapses
		got, err := pay(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, "ch_o-1_1", got.ChargeID)
		assert.Equal(t, [3]int32{1, 1, 1}, p.runs())
		close(dead)
		synctest.Wait()
	})
}

// A step reads the reservation's expiry, which the lease renews while
// the function runs: the race detector checks that they take turns.
func TestStepsRunWhileTheLeaseRenews(t *testing.T) {
	renewed := make(chan struct{}, 1)
	obs := idempotency.ObserverFunc(func(_ context.Context, e idempotency.Event) {
		if e.Kind == idempotency.EventRenewed && e.Err == nil {
			select {
			case renewed <- struct{}{}:
			default:
			}
		}
	})
	pay := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
		<-renewed
		charge, err := idempotency.Step(ctx, "charge", func(context.Context) (string, error) { return "ch_" + o.OrderID, nil })
		return receipt{ChargeID: charge, Amount: o.Amount}, err
	}, memory.New(), idempotency.WithLease(30*time.Millisecond), idempotency.WithObserver(obs))
	got, err := pay(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, "ch_o-1", got.ChargeID)
}

// A step of an attempt that was taken over, which finishes after the
// attempt that took over stored the step, writes nothing and returns the
// stored result.
func TestLateStepWriteNeitherOverwritesNorDuplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var runs atomic.Int32
		resume := make(chan struct{})
		lateResult := make(chan string, 1)
		h := func(ctx context.Context, o order) (string, error) {
			return idempotency.Step(ctx, "charge", func(ctx context.Context) (string, error) {
				n := runs.Add(1)
				if n == 1 {
					<-resume // the first attempt's step takes too long
				}
				return fmt.Sprintf("ch_%d", n), nil
			})
		}
		pay := mustWrap(t, h, store, idempotency.WithKeyPrefix("p"), idempotency.WithLogger(discardLogger()))

		first, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		go func() {
			out, _ := pay(first, o1)
			lateResult <- out
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		got, err := pay(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, "ch_2", got)

		close(resume)
		assert.Equal(t, "ch_2", <-lateResult, "the late step returns the stored result, not its own")
		rec, err := store.Get(t.Context(), core.StepKey(keyOf(t, "p", o1), "charge"))
		require.NoError(t, err)
		assert.JSONEq(t, `"ch_2"`, string(rec.Response), "the first stored result stays")
	})
}

func TestStepKeyIsTheCallsKeyAndTheName(t *testing.T) {
	var callKey, stepKey string
	h := func(ctx context.Context, o order) (string, error) {
		callKey, _ = idempotency.KeyFromContext(ctx)
		var err error
		stepKey, err = idempotency.StepKey(ctx, "charge card/1")
		return stepKey, err
	}
	_, err := mustWrap(t, h, memory.New(), idempotency.WithKeyPrefix("orders"))(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, keyOf(t, "orders", o1), callKey)
	assert.Equal(t, callKey+"#step=charge%20card%2F1", stepKey)
}

func TestStepOutsideACallFails(t *testing.T) {
	ran := false
	_, err := idempotency.Step(t.Context(), "charge", func(context.Context) (int, error) {
		ran = true
		return 1, nil
	})
	require.ErrorContains(t, err, `idempotency: step "charge": not inside`)
	assert.False(t, ran, "a step without a call does not run")

	_, err = idempotency.StepKey(t.Context(), "charge")
	require.ErrorContains(t, err, `idempotency: step "charge": not inside`)
}

func TestStepNamesAreChecked(t *testing.T) {
	for _, name := range []string{"", strings.Repeat("x", core.MaxStepName+1)} {
		h := func(ctx context.Context, o order) (int, error) {
			return idempotency.Step(ctx, name, func(context.Context) (int, error) { return 1, nil })
		}
		_, err := mustWrap(t, h, memory.New())(t.Context(), o1)
		require.ErrorContains(t, err, "idempotency: step ", "name of %d bytes", len(name))
		_, err = idempotency.StepKey(t.Context(), name)
		require.ErrorContains(t, err, "idempotency: step ")
	}
	h := func(ctx context.Context, o order) (int, error) { return idempotency.Step[int](ctx, "charge", nil) }
	_, err := mustWrap(t, h, memory.New())(t.Context(), o1)
	require.ErrorContains(t, err, `idempotency: step "charge": nil function`)
}

func TestPermanentStepErrorIsRecordedAndReplayed(t *testing.T) {
	var runs atomic.Int32
	errDeclined := errors.New("card declined")
	h := func(ctx context.Context, o order) (string, error) {
		_, err := idempotency.Step(ctx, "charge", func(context.Context) (string, error) {
			runs.Add(1)
			return "", idempotency.Permanent(errDeclined)
		})
		return "", err
	}
	pay := mustWrap(t, h, memory.New())
	_, err := pay(t.Context(), o1)
	require.ErrorIs(t, err, errDeclined, "the first attempt gets the step's own error")
	_, err = pay(t.Context(), o1)
	var re *idempotency.RecordedError
	require.ErrorAs(t, err, &re, "the retry gets the recorded error")
	assert.Equal(t, "card declined", re.Message)
	assert.Equal(t, int32(1), runs.Load())
}

func TestStepOfAnotherPayloadIsAMismatch(t *testing.T) {
	p := &payment{fail: func(after string) error {
		if after == "charge" {
			return errAfterCharge
		}
		return nil
	}}
	pay := mustWrap(t, p.handle, memory.New(), idempotency.WithKey("order_id"), idempotency.WithPayloadValidation("amount"))
	_, err := pay(t.Context(), o1)
	require.ErrorIs(t, err, errAfterCharge)
	other := o1
	other.Amount++
	_, err = pay(t.Context(), other)
	require.ErrorIs(t, err, idempotency.ErrPayloadMismatch)
	assert.Equal(t, int32(1), p.charges.Load())
}

func TestStepsRunWithoutTheLibraryWhenDisabled(t *testing.T) {
	t.Setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
	p := &payment{}
	pay := mustWrap(t, p.handle, memory.New())
	for range 2 {
		_, err := pay(t.Context(), o1)
		require.NoError(t, err)
	}
	assert.Equal(t, [3]int32{2, 2, 2}, p.runs())
}

func TestStepsAreObserved(t *testing.T) {
	p := &payment{}
	failures := 1
	p.fail = func(after string) error {
		if after == "ledger" && failures > 0 {
			failures--
			return errAfterCharge
		}
		return nil
	}
	var mu sync.Mutex
	var steps []string
	obs := idempotency.ObserverFunc(func(_ context.Context, e idempotency.Event) {
		if e.Kind == idempotency.EventStep {
			mu.Lock()
			steps = append(steps, e.Op+" "+string(e.Outcome))
			mu.Unlock()
		}
	})
	pay := mustWrap(t, p.handle, memory.New(), idempotency.WithObserver(obs))
	_, err := pay(t.Context(), o1)
	require.Error(t, err)
	_, err = pay(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, []string{"charge new", "ledger new", "charge replay", "ledger replay", "email new"}, steps)
}

// counting counts the requests to its store. It hides the memory store's
// local reads, so that it costs what a store over the network does.
type counting struct {
	persistence.Store
	mu       sync.Mutex
	requests int
}

func (s *counting) add() { s.mu.Lock(); s.requests++; s.mu.Unlock() }
func (s *counting) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	s.add()
	return s.Store.Put(ctx, rec, now)
}
func (s *counting) Get(ctx context.Context, key string) (*persistence.Record, error) {
	s.add()
	return s.Store.Get(ctx, key)
}
func (s *counting) Update(ctx context.Context, rec *persistence.Record) error {
	s.add()
	return s.Store.Update(ctx, rec)
}
func (s *counting) Delete(ctx context.Context, key, token string) error {
	s.add()
	return s.Store.Delete(ctx, key, token)
}
func (s *counting) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.requests
	s.requests = 0
	return n
}

// The store requests of a call with 0, 1 and 3 steps: a step costs a
// read and a write when it runs, a read when it replays inside a retry,
// and nothing when the call's completed record answers.
func TestStepRequestsPerCall(t *testing.T) {
	for _, tc := range []struct {
		steps                  int
		first, replay, resumed int
	}{
		{steps: 0, first: 2, replay: 1, resumed: 2},
		{steps: 1, first: 4, replay: 1, resumed: 3},
		{steps: 3, first: 8, replay: 1, resumed: 5},
	} {
		t.Run(fmt.Sprint(tc.steps), func(t *testing.T) {
			store := &counting{Store: memory.New()}
			fail := true
			h := func(ctx context.Context, o order) (int, error) {
				for i := range tc.steps {
					if _, err := idempotency.Step(ctx, fmt.Sprint("s", i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return 0, err
					}
				}
				return tc.steps, nil
			}
			pay := mustWrap(t, h, store)
			_, err := pay(t.Context(), o1)
			require.NoError(t, err)
			assert.Equal(t, tc.first, store.take(), "first call")
			_, err = pay(t.Context(), o1)
			require.NoError(t, err)
			assert.Equal(t, tc.replay, store.take(), "replay")

			// A call that fails after its steps, and its retry.
			failing := mustWrap(t, func(ctx context.Context, o order) (int, error) {
				n, err := h(ctx, o)
				if fail {
					fail = false
					return 0, errAfterCharge
				}
				return n, err
			}, store)
			o := order{OrderID: "o-2"}
			_, err = failing(t.Context(), o)
			require.ErrorIs(t, err, errAfterCharge)
			store.take()
			_, err = failing(t.Context(), o)
			require.NoError(t, err)
			assert.Equal(t, tc.resumed, store.take(), "a retry that resumes after every step")
			t.Logf("%d steps: first call %d requests, replay %d, retry resuming %d", tc.steps, tc.first, tc.replay, tc.resumed)
		})
	}
}
