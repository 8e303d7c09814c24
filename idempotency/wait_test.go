package idempotency_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// gate is a handler that blocks until it is opened, and then answers, or
// fails, or panics.
type gate struct {
	entered chan struct{}
	open    chan struct{}
	counter
	outcome func() (receipt, error) // nil: a receipt
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 16), open: make(chan struct{})}
}

func (g *gate) handle(ctx context.Context, o order) (receipt, error) {
	g.entered <- struct{}{}
	<-g.open
	r, err := g.counter.handle(ctx, o)
	if g.outcome != nil {
		return g.outcome()
	}
	return r, err
}

// holdKey starts a call of h with o that blocks in g, and returns when it
// holds the key, with a function that opens g and waits for the call's
// result.
func holdKey(t *testing.T, g *gate, h func(context.Context, order) (receipt, error), o order) (finish func() (receipt, error)) {
	t.Helper()
	var (
		wg  sync.WaitGroup
		got receipt
		err error
	)
	wg.Go(func() { got, err = h(context.Background(), o) })
	<-g.entered
	return func() (receipt, error) {
		close(g.open)
		wg.Wait()
		return got, err
	}
}

// waitFor calls h with o in a goroutine, and returns a function that waits
// for its result.
func waitFor(ctx context.Context, h func(context.Context, order) (receipt, error), o order) func() (receipt, error) {
	var (
		wg  sync.WaitGroup
		got receipt
		err error
	)
	wg.Go(func() { got, err = h(ctx, o) })
	return func() (receipt, error) { wg.Wait(); return got, err }
}

// A duplicate in the same process, without WithWait, gets InProgressError
// at once, without a store request of its own.
func TestDuplicateInProcessIsRefusedWithoutARequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := faultstore.New(memory.New())
		g := newGate()
		h := mustWrap(t, g.handle, store, idempotency.WithKeyPrefix("p"))
		finish := holdKey(t, g, h, o1)
		puts := store.Calls(faultstore.OpPut)

		_, err := h(t.Context(), o1)
		var ipe *idempotency.InProgressError
		require.ErrorAs(t, err, &ipe)
		assert.False(t, ipe.Until.IsZero(), "the reservation's lapse is known")
		assert.Equal(t, puts, store.Calls(faultstore.OpPut), "no store request")
		assert.Zero(t, store.Calls(faultstore.OpGet))

		_, err = finish()
		require.NoError(t, err)
		again, err := h(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, "ch_o-1_1", again.ChargeID)
		assert.Equal(t, 1, g.count())
	})
}

// holderMark marks the context of a holder's call.
type holderMark struct{}

// The outcomes of a wait in the holder's process, each woken by the
// holder's outcome, without polling.
func TestWaitInProcess(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		outcome func() (receipt, error) // the holder's
		// want is what the waiter gets: the holder's receipt (replayed),
		// or its own run's.
		wantCharge string
		wantRuns   int
		wantErr    bool // a recorded error
	}{
		{name: "completed", wantCharge: "ch_o-1_1", wantRuns: 1},
		{name: "released, then run", outcome: func() (receipt, error) { return receipt{}, boom }, wantCharge: "ch_o-1_2", wantRuns: 2},
		{name: "holder panicked", outcome: func() (receipt, error) { panic("holder") }, wantCharge: "ch_o-1_2", wantRuns: 2},
		{name: "permanent error recorded", outcome: func() (receipt, error) { return receipt{}, idempotency.Permanent(boom) },
			wantRuns: 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := faultstore.New(memory.New())
				var ev eventLog
				holderGate := newGate()
				holderGate.outcome = tc.outcome
				// One function, whose first call (the holder's, marked in its
				// context) is the gate's, and whose others share its run
				// count.
				charge := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
					if ctx.Value(holderMark{}) != nil {
						return holderGate.handle(ctx, o)
					}
					holderGate.counter.mu.Lock()
					holderGate.counter.runs++
					n := holderGate.counter.runs
					holderGate.counter.mu.Unlock()
					return receipt{ChargeID: "ch_o-1_" + string(rune('0'+n))}, nil
				}, store, idempotency.WithKeyPrefix("p"), idempotency.WithWait(time.Minute), idempotency.WithObserver(&ev))

				var wg sync.WaitGroup
				wg.Go(func() {
					defer func() { _ = recover() }()
					_, _ = charge(context.WithValue(context.Background(), holderMark{}, true), o1)
				})
				<-holderGate.entered
				puts := store.Calls(faultstore.OpPut)
				result := waitFor(t.Context(), charge, o1)
				synctest.Wait() // the waiter is blocked on the holder's flight
				assert.Equal(t, puts, store.Calls(faultstore.OpPut), "the waiter asks nothing of the store while it waits")
				close(holderGate.open)
				wg.Wait()

				got, err := result()
				if tc.wantErr {
					require.ErrorAs(t, err, new(*idempotency.RecordedError))
				} else {
					require.NoError(t, err)
					assert.Equal(t, tc.wantCharge, got.ChargeID)
				}
				assert.Equal(t, tc.wantRuns, holderGate.count())
				assert.Contains(t, ev.list(), "waited")
			})
		})
	}
}

func TestWaitTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		store := memory.New()
		holder := mustWrap(t, g.handle, store, idempotency.WithKeyPrefix("p"))
		waiter := mustWrap(t, g.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithWait(5*time.Second))
		finish := holdKey(t, g, holder, o1)

		start := time.Now()
		_, err := waiter(t.Context(), o1)
		assert.ErrorIs(t, err, idempotency.ErrInProgress)
		assert.Equal(t, 5*time.Second, time.Since(start), "the wait's maximum")

		// A context deadline shortens the wait, leaving a tenth of it for
		// the answer.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start = time.Now()
		_, err = waiter(ctx, o1)
		assert.ErrorIs(t, err, idempotency.ErrInProgress)
		assert.Equal(t, 1800*time.Millisecond, time.Since(start))
		_, err = finish()
		require.NoError(t, err)
	})
}

// A waiter whose context is cancelled stops waiting with the context's
// error, and the holder goes on undisturbed.
func TestWaitCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		store := memory.New()
		h := mustWrap(t, g.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithWait(time.Minute))
		finish := holdKey(t, g, h, o1)

		ctx, cancel := context.WithCancel(t.Context())
		result := waitFor(ctx, h, o1)
		synctest.Wait()
		cancel()
		_, err := result()
		assert.ErrorIs(t, err, context.Canceled)

		got, err := finish()
		require.NoError(t, err)
		assert.Equal(t, "ch_o-1_1", got.ChargeID)
		again, err := h(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, got, again)
		assert.Equal(t, 1, g.count())
	})
}

// A holder that runs past its deadline is taken over; its completion is
// fenced out. A waiter in its process follows the call that took over.
func TestWaitHolderFencedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var ev eventLog
		late := newGate()
		slow := mustWrap(t, late.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithObserver(&ev))
		var c counter
		taker := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"), idempotency.WithWait(time.Minute))

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		slowResult := waitFor(ctx, slow, o1)
		<-late.entered
		time.Sleep(11 * time.Second) // past the slow call's deadline: its reservation lapsed
		got, err := taker(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, "ch_o-1_1", got.ChargeID, "the key is taken over, not waited for")

		close(late.open)
		_, err = slowResult()
		require.NoError(t, err)
		assert.Contains(t, ev.list(), "complete fenced")
		again, err := taker(t.Context(), o1)
		require.NoError(t, err)
		assert.Equal(t, got, again)
	})
}

// twoProcesses is a holder of o1 and a waiter for it in two processes:
// two Guards over two distinct store values of one backing store, so that
// they share no flights.
type twoProcesses struct {
	// there is the waiter's store.
	there *faultstore.Store
	// waiter counts the runs of the waiter's function.
	waiter counter
	holder *gate
	// finish lets the holder's function end, and returns its result;
	// result returns the waiter's.
	finish, result func() (receipt, error)
}

// acrossProcesses starts the holder, and, once it holds the key, the
// waiter, which waits up to wait, over a store with fault, and decorated
// by decorate if set.
func acrossProcesses(t *testing.T, wait time.Duration, fault func(faultstore.Op, string, int) faultstore.Fault,
	decorate ...func(persistence.Store) persistence.Store) *twoProcesses {
	shared := memory.New()
	p := &twoProcesses{there: faultstore.New(shared), holder: newGate()}
	p.there.Fault = fault
	var there persistence.Store = p.there
	for _, d := range decorate {
		there = d(there)
	}
	holder := mustWrap(t, p.holder.handle, faultstore.New(shared), idempotency.WithKeyPrefix("p"))
	waiter := mustWrap(t, p.waiter.handle, there, idempotency.WithKeyPrefix("p"), idempotency.WithWait(wait),
		idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	p.finish = holdKey(t, p.holder, holder, o1)
	p.result = waitFor(t.Context(), waiter, o1)
	return p
}

// replayed checks that the holder completed, and the waiter got its
// result, and returns how long after the completion it did.
func (p *twoProcesses) replayed(t *testing.T) (after time.Duration) {
	_, err := p.finish()
	require.NoError(t, err)
	completed := time.Now()
	got, err := p.result()
	require.NoError(t, err)
	assert.Equal(t, "ch_o-1_1", got.ChargeID, "the holder's result, replayed")
	assert.Zero(t, p.waiter.count())
	return time.Since(completed)
}

// Waiters in another process (another store client, no shared memory)
// poll the store, with backoff, when it cannot wake them: few requests
// for a long wait.
func TestWaitAcrossProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acrossProcesses(t, time.Minute, faultstore.On(faultstore.OpWatch, 0, faultstore.FailBefore))
		time.Sleep(10 * time.Second)
		p.replayed(t)
		// 10 s of polling: 10, 20, ..., 320 ms (6), then 375 to 500 ms.
		polls := p.there.Calls(faultstore.OpPut)
		assert.LessOrEqual(t, polls, 6+3*10+1)
		assert.GreaterOrEqual(t, polls, 10)
		assert.Equal(t, 1, p.there.Calls(faultstore.OpWatch), "one failed watch, then polls")
	})
}

// Over a store that wakes waiters, a waiter in another process is answered
// as the holder completes, not at its next poll, and polls rarely: the
// conflict, the read after the watch began, and a poll every 1.5 to 2 s.
// The wake-up carries the answer.
func TestWaitAcrossProcessesIsWoken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acrossProcesses(t, time.Minute, nil)
		time.Sleep(10 * time.Second)
		assert.Zero(t, p.replayed(t), "answered without waiting for a poll")
		polls := p.there.Calls(faultstore.OpPut)
		assert.LessOrEqual(t, polls, 2+10*2/3)
		assert.GreaterOrEqual(t, polls, 2+10/2)
		assert.Equal(t, 1, p.there.Calls(faultstore.OpWatch))
	})
}

// A woken waiter answers from the completed record its wake-up carries:
// two store requests in all, the conflict and the read after the watch
// began.
func TestWaitWokenAnswersFromTheWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acrossProcesses(t, time.Minute, nil)
		synctest.Wait()
		assert.Zero(t, p.replayed(t))
		assert.Equal(t, 2, p.there.Calls(faultstore.OpPut)+p.there.Calls(faultstore.OpGet), "store requests")
	})
}

// telling is a store whose wake-ups the test sends on woken.
type telling struct {
	persistence.Store
	woken chan *persistence.Record
}

func (s telling) Watch(context.Context, string) (<-chan *persistence.Record, func(), error) {
	return s.woken, func() {}, nil
}

// A wake-up's record counts only when it is the live completion of the
// reservation the waiter saw. Another reservation's completion (a late
// wake-up, or a forged one) and an expired record are read again, and the
// waiter gets the holder's result.
func TestWaitReadsAgainAfterAWakeUpItCannotUse(t *testing.T) {
	for _, name := range []string{"another token", "expired"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				woken := make(chan *persistence.Record, 1)
				p := acrossProcesses(t, time.Minute, nil, func(s persistence.Store) persistence.Store { return telling{s, woken} })
				synctest.Wait()
				require.Equal(t, 2, p.there.Calls(faultstore.OpPut))
				var held *persistence.Record
				require.NoError(t, p.there.Inner.(persistence.Admin).List(t.Context(), "", 0, func(recs []*persistence.Record) error {
					held = recs[0]
					return nil
				}))
				told := *held
				told.Status, told.Response = persistence.StatusCompleted, []byte(`{"charge_id":"told"}`)
				if name == "expired" {
					told.ExpiresAt = time.Now().Add(-time.Second)
				} else {
					told.Token = "another"
				}
				woken <- &told
				synctest.Wait()
				assert.Equal(t, 3, p.there.Calls(faultstore.OpPut), "read again")
				p.replayed(t)
			})
		})
	}
}

// A cache in front of a store that wakes waiters keeps the wake-ups: the
// waiter watches the store under it.
func TestWaitIsWokenThroughACache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acrossProcesses(t, time.Minute, nil, func(s persistence.Store) persistence.Store { return memory.NewCache(s, 16) })
		time.Sleep(10 * time.Second)
		assert.Zero(t, p.replayed(t), "answered without waiting for a poll")
		assert.Equal(t, 1, p.there.Calls(faultstore.OpWatch))
	})
}

// A waiter woken by a release (the holder's function failed) takes the key
// and runs its own function, as a polling one does.
func TestWaitWokenByReleaseRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acrossProcesses(t, time.Minute, nil)
		p.holder.outcome = func() (receipt, error) { return receipt{}, errors.New("card declined") }
		time.Sleep(10 * time.Second)
		_, err := p.finish()
		require.Error(t, err)
		released := time.Now()
		_, err = p.result()
		require.NoError(t, err)
		assert.Equal(t, 1, p.waiter.count(), "the waiter ran its own function")
		assert.Zero(t, time.Since(released), "woken by the release")
	})
}

// A lost wake-up delays a waiter by one poll at most: it still polls,
// every 1.5 to 2 seconds, while it watches.
func TestWaitLostWakeUpCostsOnePoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acrossProcesses(t, time.Minute, faultstore.On(faultstore.OpWatch, 0, faultstore.LoseReply))
		time.Sleep(10 * time.Second)
		assert.LessOrEqual(t, p.replayed(t), 2*time.Second, "one poll interval")
		polls := p.there.Calls(faultstore.OpPut)
		assert.LessOrEqual(t, polls, 3+10*2/3+1)
		assert.GreaterOrEqual(t, polls, 3+10/2)
	})
}

// A poll that fails (a dropped connection, a restarting server) does not
// end the wait: the waiter polls again, within its budget, and gets the
// holder's result.
func TestWaitSurvivesFailedPolls(t *testing.T) {
	for _, name := range []string{"polling", "woken"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := acrossProcesses(t, time.Minute, func(op faultstore.Op, _ string, n int) faultstore.Fault {
					switch {
					case op == faultstore.OpWatch && name == "polling":
						return faultstore.FailBefore
					case op == faultstore.OpPut && n >= 2 && n <= 4:
						return faultstore.FailBefore
					}
					return faultstore.None
				})
				time.Sleep(10 * time.Second)
				p.replayed(t)
				assert.Greater(t, p.there.Calls(faultstore.OpPut), 4, "the failed polls were retried")
			})
		})
	}
}

// A wait whose polls keep failing ends with the store's error when its
// budget runs out, not before.
func TestWaitFailingPollsEndWithTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := acrossProcesses(t, 5*time.Second, func(op faultstore.Op, _ string, n int) faultstore.Fault {
			if op == faultstore.OpPut && n >= 2 {
				return faultstore.FailBefore
			}
			return faultstore.None
		})
		_, err := p.result()
		var se *idempotency.StoreError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 5*time.Second, time.Since(start), "the whole budget")
		_, err = p.finish()
		require.NoError(t, err)
	})
}

// Several callers with one key in one process: one store reservation for
// the burst, one run, one answer for all.
func TestBurstSharesOneReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := faultstore.New(memory.New())
		var c counter
		h := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
			time.Sleep(50 * time.Millisecond)
			return c.handle(ctx, o)
		}, store, idempotency.WithKeyPrefix("p"), idempotency.WithWait(time.Second))
		var wg sync.WaitGroup
		results := make([]receipt, 64)
		for i := range results {
			wg.Go(func() {
				got, err := h(t.Context(), o1)
				assert.NoError(t, err)
				results[i] = got
			})
		}
		wg.Wait()
		assert.Equal(t, 1, c.count())
		for _, got := range results {
			assert.Equal(t, "ch_o-1_1", got.ChargeID)
		}
		assert.Equal(t, 1, store.Calls(faultstore.OpPut), "one reservation for the burst")
		assert.Equal(t, 1, store.Calls(faultstore.OpUpdate))
	})
}
