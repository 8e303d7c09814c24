package chaos

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
)

// An environment's store is a stack:
//
//	library
//	probe        records each call and its result; refuses the calls of killed invocations;
//	             reads the environment's clock for the time a reservation is made at
//	[local cache] memory.Cache, in some environments
//	dispatch     sends each call through its invocation's faultstore.Store
//	backend      the environment's own client of the real store (HTTP faults below it)
//
// The probe sits right under the library, so it records what the library
// asked and what it was told, and nothing of a killed invocation gets past
// it. It puts the call it records in the context of the call, where the
// fault injection below finds it when it holds a write back (see late.go).
//
// Over a backend whose store runs the function's writes in its
// transactions (persistence.TxStore), every layer passes BeginTx on and
// wraps the transaction it gets back: the probe records its begin and its
// commit (the completion, as the commit of staged writes is), the cache
// caches what it commits, and the invocation's faultstore.Store injects
// its faults into both (faultstore.Store.BeginTx says which). A rollback
// is not recorded: it writes nothing, and the library sends one only
// after the function failed.

// errNoInvocation is returned for store calls whose context carries no
// invocation; the harness reports them.
var errNoInvocation = errors.New("chaos: store call without an invocation in its context")

// probe records the store calls of invocations. It also gives the
// environment its clock: a reservation is made at the library's time plus
// skew, the offset of the environment's clock from true time, which is
// what decides whether a record it meets is still live.
type probe struct {
	h     *Harness
	inner persistence.Store
	skew  time.Duration
}

var (
	_ persistence.Committer = (*probe)(nil)
	_ persistence.TxStore   = (*probe)(nil)
)

// begin returns the invocation of a call, or the error to fail it with.
func (p *probe) begin(ctx context.Context, op faultstore.Op, key string) (*invocation, error) {
	inv := invocationFrom(ctx)
	if inv == nil {
		p.h.strayCall(string(op), key)
		return nil, errNoInvocation
	}
	if inv.killed.Load() {
		// A dead process sends nothing.
		p.h.count(countCutOff)
		return nil, errKilled
	}
	k := inv.k
	k.mu.Lock()
	if k.storeKey == "" {
		k.storeKey = key
	} else if key != k.storeKey {
		k.violate(checkContract, "invocation %s: %s of key %q, but the key's calls so far used %q", inv.id, op, key, k.storeKey)
	}
	k.mu.Unlock()
	return inv, nil
}

// pendingCall is a call the probe is recording, in the call's context.
type pendingCall struct {
	call storeCall // as sent; not changed once the call is under way
	// held is set when the fault injection held the call back: it failed
	// at once without reaching the store, and reaches it later.
	held atomic.Bool
}

type pendingKey struct{}

// send returns the pending call of c and the context to pass it down in.
func send(ctx context.Context, inv *invocation, c storeCall) (context.Context, *pendingCall) {
	c.Inv = inv.id
	pc := &pendingCall{call: c}
	return context.WithValue(ctx, pendingKey{}, pc), pc
}

// pendingFrom returns the call that ctx belongs to, or nil.
func pendingFrom(ctx context.Context) *pendingCall {
	pc, _ := ctx.Value(pendingKey{}).(*pendingCall)
	return pc
}

// end records the call pc, which returned err; found is the token of the
// record a Get returned.
func (p *probe) end(inv *invocation, pc *pendingCall, err error, found string) {
	c := pc.call
	c.OtherToken = found
	c.End = time.Now()
	c.Result = classifyStoreError(err)
	if pc.held.Load() {
		c.Result = resultHeld
	}
	var conflict *persistence.ConflictError
	if errors.As(err, &conflict) && conflict.Existing != nil {
		c.OtherToken = conflict.Existing.Token
	}
	k := inv.k
	k.mu.Lock()
	k.calls = append(k.calls, c)
	k.mu.Unlock()
	p.h.count("call_" + c.opName() + "_" + string(c.Result))
}

func classifyStoreError(err error) result {
	var conflict *persistence.ConflictError
	switch {
	case err == nil:
		return resultOK
	case errors.As(err, &conflict):
		return resultConflict
	case errors.Is(err, persistence.ErrFenced):
		return resultFenced
	case errors.Is(err, persistence.ErrResponseOmitted):
		return resultOmitted
	case errors.Is(err, persistence.ErrNotFound):
		return resultNotFound
	case errors.Is(err, persistence.ErrCommitCanceled):
		return resultCanceled
	}
	return resultFailed
}

// Put implements persistence.Store.
func (p *probe) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	inv, err := p.begin(ctx, faultstore.OpPut, rec.Key)
	if err != nil {
		return err
	}
	now = now.Add(p.skew)
	ctx, c := send(ctx, inv, storeCall{Op: faultstore.OpPut, Token: rec.Token, Now: now,
		InProgressUntil: rec.InProgressExpiresAt, ExpiresAt: rec.ExpiresAt, Start: time.Now()})
	err = p.inner.Put(ctx, rec, now)
	p.end(inv, c, err, "")
	return err
}

// Get implements persistence.Store.
func (p *probe) Get(ctx context.Context, key string) (*persistence.Record, error) {
	inv, err := p.begin(ctx, faultstore.OpGet, key)
	if err != nil {
		return nil, err
	}
	ctx, c := send(ctx, inv, storeCall{Op: faultstore.OpGet, Start: time.Now()})
	rec, err := p.inner.Get(ctx, key)
	found := ""
	if rec != nil {
		found = rec.Token
	}
	p.end(inv, c, err, found)
	return rec, err
}

// Update implements persistence.Store.
func (p *probe) Update(ctx context.Context, rec *persistence.Record) error {
	inv, err := p.begin(ctx, faultstore.OpUpdate, rec.Key)
	if err != nil {
		return err
	}
	ctx, c := send(ctx, inv, storeCall{Op: faultstore.OpUpdate, Token: rec.Token,
		Renewal:         rec.Status == persistence.StatusInProgress,
		InProgressUntil: rec.InProgressExpiresAt, ExpiresAt: rec.ExpiresAt, Start: time.Now()})
	err = p.inner.Update(ctx, rec)
	p.end(inv, c, err, "")
	return err
}

// Delete implements persistence.Store.
func (p *probe) Delete(ctx context.Context, key, token string) error {
	inv, err := p.begin(ctx, faultstore.OpDelete, key)
	if err != nil {
		return err
	}
	ctx, c := send(ctx, inv, storeCall{Op: faultstore.OpDelete, Token: token, Start: time.Now()})
	err = p.inner.Delete(ctx, key, token)
	p.end(inv, c, err, "")
	return err
}

// Commit implements persistence.Committer: it records the commit as the
// completion write it is.
func (p *probe) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	inv, err := p.begin(ctx, faultstore.OpCommit, rec.Key)
	if err != nil {
		return err
	}
	committer, ok := p.inner.(persistence.Committer)
	if !ok {
		return errors.New("chaos: the store under the probe does not commit staged writes")
	}
	ctx, c := send(ctx, inv, storeCall{Op: faultstore.OpCommit, Token: rec.Token,
		InProgressUntil: rec.InProgressExpiresAt, ExpiresAt: rec.ExpiresAt, Start: time.Now()})
	err = committer.Commit(ctx, rec, writes)
	p.end(inv, c, err, "")
	return err
}

// BeginTx implements persistence.TxStore: it records the begin, and
// returns the transaction with its commit recorded as Commit records a
// commit of staged writes.
func (p *probe) BeginTx(ctx context.Context, rec *persistence.Record) (context.Context, persistence.Tx, error) {
	inv, err := p.begin(ctx, faultstore.OpBegin, rec.Key)
	if err != nil {
		return ctx, nil, err
	}
	txStore, ok := p.inner.(persistence.TxStore)
	if !ok {
		return ctx, nil, errors.New("chaos: the store under the probe does not run transactions")
	}
	// The begin's context becomes the function's: it does not carry the
	// pending call, which no fault injection holds back.
	_, c := send(ctx, inv, storeCall{Op: faultstore.OpBegin, Token: rec.Token, Start: time.Now()})
	fnCtx, tx, err := txStore.BeginTx(ctx, rec)
	p.end(inv, c, err, "")
	if err != nil {
		return ctx, nil, err
	}
	return fnCtx, &probeTx{p: p, inner: tx}, nil
}

// probeTx is a transaction whose commit the probe records.
type probeTx struct {
	p     *probe
	inner persistence.Tx
}

// Commit implements persistence.Tx.
func (t *probeTx) Commit(ctx context.Context, rec *persistence.Record) error {
	inv, err := t.p.begin(ctx, faultstore.OpCommit, rec.Key)
	if err != nil {
		// A dead process sends no COMMIT; its connection closes, and the
		// server rolls the transaction back.
		_ = t.inner.Rollback(context.WithoutCancel(ctx))
		return err
	}
	ctx, c := send(ctx, inv, storeCall{Op: faultstore.OpCommit, Token: rec.Token,
		InProgressUntil: rec.InProgressExpiresAt, ExpiresAt: rec.ExpiresAt, Start: time.Now()})
	err = t.inner.Commit(ctx, rec)
	t.p.end(inv, c, err, "")
	return err
}

// Rollback implements persistence.Tx. A killed invocation's goes through
// too: it stands for the connection that closes when a process dies.
func (t *probeTx) Rollback(ctx context.Context) error { return t.inner.Rollback(ctx) }

// Unwrap returns the store the probe decorates (persistence.Commits).
func (p *probe) Unwrap() persistence.Store { return p.inner }

// dispatch sends each call through the fault injector of the invocation it
// belongs to, whose inner store is the environment's backend store. Calls
// without an invocation go straight to the backend.
type dispatch struct{ backend persistence.Store }

var (
	_ persistence.Committer = dispatch{}
	_ persistence.TxStore   = dispatch{}
)

func (d dispatch) store(ctx context.Context) persistence.Store {
	if inv := invocationFrom(ctx); inv != nil {
		return inv.faults
	}
	return d.backend
}

func (d dispatch) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	return d.store(ctx).Put(ctx, rec, now)
}

func (d dispatch) Get(ctx context.Context, key string) (*persistence.Record, error) {
	return d.store(ctx).Get(ctx, key)
}

func (d dispatch) Update(ctx context.Context, rec *persistence.Record) error {
	return d.store(ctx).Update(ctx, rec)
}

func (d dispatch) Delete(ctx context.Context, key, token string) error {
	return d.store(ctx).Delete(ctx, key, token)
}

// Commit implements persistence.Committer, over a backend that commits.
func (d dispatch) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	committer, ok := d.store(ctx).(persistence.Committer)
	if !ok {
		return errors.New("chaos: the backend's store does not commit staged writes")
	}
	return committer.Commit(ctx, rec, writes)
}

// BeginTx implements persistence.TxStore, over a backend that runs
// transactions.
func (d dispatch) BeginTx(ctx context.Context, rec *persistence.Record) (context.Context, persistence.Tx, error) {
	txStore, ok := d.store(ctx).(persistence.TxStore)
	if !ok {
		return ctx, nil, errors.New("chaos: the backend's store does not run transactions")
	}
	return txStore.BeginTx(ctx, rec)
}

// Unwrap returns the backend's store (persistence.Commits).
func (d dispatch) Unwrap() persistence.Store { return d.backend }

// httpFaults injects HTTP-level faults into the requests of an invocation,
// with a dynalite.Faults of its own per faulty request, so that concurrent
// invocations in one environment never take each other's faults. An
// attempt of a write may be held back and forwarded late (LateWrite),
// another attempt refused, its reply lost, or throttled (HTTPFault).
type httpFaults struct {
	h    *Harness
	base http.RoundTripper
}

func (t *httpFaults) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	inv := invocationFrom(ctx)
	if inv == nil || appliedLate(ctx) {
		return t.base.RoundTrip(req)
	}
	f := &dynalite.Faults{Base: t.base}
	switch {
	case dynamoWrites[dynalite.Operation(req)] && inv.float() < t.h.cfg.Rates.LateWrite:
		t.h.count(faultHTTPLate)
		f.Add("", dynalite.ForwardedLate, 1)
		f.OnHold = func(ctx context.Context, held *dynalite.HeldRequest) {
			inv.holdLate(ctx, true, func(ctx context.Context, c storeCall) result {
				return classifyReply(held.Forward(ctx), c, inv.k.req.Large)
			})
		}
	case inv.float() < t.h.cfg.Rates.HTTPFault:
		kinds := []dynalite.FaultKind{dynalite.Refused, dynalite.LostReply, dynalite.Throttled}
		names := []string{faultHTTPRefused, faultHTTPLostReply, faultHTTPThrottled}
		i := int(inv.float() * float64(len(kinds)))
		t.h.count(names[i])
		f.Add("", kinds[i], 1)
	default:
		return t.base.RoundTrip(req)
	}
	return f.RoundTrip(req)
}

// dynamoWrites are the DynamoDB operations of the store's writes.
var dynamoWrites = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true}

// classifyReply classifies the reply to a request forwarded late, c's
// attempt, as the store would have classified it. A completion of a large
// response that applied is recorded as omitted: the store leaves the
// response of every large request out (ResponseLimit), which its
// reply does not say.
func classifyReply(err error, c storeCall, large bool) result {
	var reply *dynalite.ReplyError
	switch {
	case err == nil:
		if large && !c.Renewal && (c.Op == faultstore.OpUpdate || c.Op == faultstore.OpCommit) {
			return resultOmitted
		}
		return resultOK
	case errors.As(err, &reply) && reply.Type == "ConditionalCheckFailedException":
		if c.Op == faultstore.OpPut {
			return resultConflict
		}
		return resultFenced
	case errors.As(err, &reply) && reply.Type == "TransactionCanceledException":
		return resultCanceled
	}
	return resultFailed
}
