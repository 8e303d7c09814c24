package chaos

import (
	"context"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
)

// Writes applied late (Rates.LateWrite). A write that the fault injection
// holds back fails at once for its sender, as a timeout does, and reaches
// the store later, after its sender moved on:
//
//   - at the store interface (faultstore.ApplyLate), the call itself is
//     held: it never reached the store while its caller waited;
//   - for DynamoDB, at the HTTP level (dynalite.ForwardedLate), one
//     attempt is held and the SDK retries it: the attempt and its retry
//     both reach the store, the retry first, as when a proxy holds a
//     request.
//
// The harness releases each held write after a delay drawn from the
// invocation's generator, up to half the invocation timeout, and half of
// them only once the invocation has ended. The write applied late goes in
// the key's log as a call of its own (storeCall.Late), with the values its
// sender wrote and the result the store gave it, so that the checker knows
// when it applied and what it wrote.

// lateApplyTimeout bounds the request of a write applied late.
const lateApplyTimeout = 10 * time.Second

type lateKey struct{}

// appliedLate reports whether ctx is that of a write applied late, which
// the fault injection lets through: it already had its fault.
func appliedLate(ctx context.Context) bool { return ctx.Value(lateKey{}) != nil }

// heldByStore is the faultstore.Store's OnHold: the call of ctx is held
// back, so the probe records that it failed without reaching the store,
// and it is applied late.
func (inv *invocation) heldByStore(ctx context.Context, held *faultstore.Held) {
	if pc := pendingFrom(ctx); pc != nil {
		pc.held.Store(true)
	}
	inv.holdLate(ctx, false, func(ctx context.Context, _ storeCall) result {
		return classifyStoreError(held.Apply(ctx))
	})
}

// holdLate schedules a write held back during the store call of ctx, as
// an HTTP attempt of it (http) or the call itself: apply performs it, and
// returns its result as the store gave it. It runs
// on the goroutine of the store call, which the invocation's goroutine
// runs or waits for (a lease renewal: the call stops its renewals, waiting
// for one under way, before it returns), so the wait groups it adds to are
// above zero.
func (inv *invocation) holdLate(ctx context.Context, http bool, apply func(context.Context, storeCall) result) {
	var c storeCall
	if pc := pendingFrom(ctx); pc != nil {
		c = pc.call
	}
	c.Inv, c.Late, c.HTTP = inv.id, true, http
	inv.mu.Lock()
	delay := time.Duration(inv.rng.Int64N(int64(inv.h.cfg.Timeout/2) + 1))
	afterEnd := inv.rng.IntN(2) == 0
	inv.mu.Unlock()

	k := inv.k
	k.running.Add(1)
	inv.h.running.Go(func() {
		defer k.running.Done()
		if afterEnd {
			<-inv.ended
		}
		time.Sleep(delay)
		// The sender's context has ended, or will: the write has a
		// context of its own.
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), lateKey{}, true), lateApplyTimeout)
		defer cancel()
		c.Start = time.Now()
		c.Result = apply(ctx, c)
		c.End = time.Now()
		k.mu.Lock()
		k.calls = append(k.calls, c)
		k.mu.Unlock()
		level := ""
		if c.HTTP {
			level = "http_"
		}
		inv.h.count(countAppliedLate + level + c.opName() + "_" + string(c.Result))
	})
}
