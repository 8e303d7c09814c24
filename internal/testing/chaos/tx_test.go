package chaos

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// The transactional mode over a store whose transactions the function
// writes in (persistence.TxStore), as the PostgreSQL backends in
// persistence/postgres run it, here over the memory store: every layer of
// the stack passes BeginTx on, the probe records each commit, and the
// fault injection reaches BEGIN and COMMIT.

// memoryTxBackend is the memory backend in transactional mode: the side
// effect is written in the call's transaction, and applied with the
// completion. With outside set, it is written at once instead, outside
// the transaction, as a handler that ignores its transaction would.
type memoryTxBackend struct {
	*memoryBackend
	outside bool

	mu      sync.Mutex
	effects map[string]map[string]string // by key, by invocation
}

func newMemoryTxBackend(outside bool) *memoryTxBackend {
	return &memoryTxBackend{memoryBackend: Memory().(*memoryBackend), outside: outside, effects: map[string]map[string]string{}}
}

func (b *memoryTxBackend) Name() string { return "memory-tx" }

func (b *memoryTxBackend) NewStore(*Env) (persistence.Store, error) {
	return memoryTxStore{Store: b.store, b: b}, nil
}

func (b *memoryTxBackend) Transactional() bool { return true }

func (b *memoryTxBackend) StageEffect(ctx context.Context, key, inv, answer string) error {
	tx, ok := ctx.Value(memoryTxKey{}).(*memoryTx)
	if !ok {
		return errors.New("no transaction in the handler's context")
	}
	if b.outside {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.apply(map[[2]string]string{{key, inv}: answer})
		return nil
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.ended {
		return &TransientError{Invocation: inv, Err: errors.New("the transaction has ended")}
	}
	tx.writes[[2]string{key, inv}] = answer
	return nil
}

func (b *memoryTxBackend) apply(writes map[[2]string]string) {
	for w, answer := range writes {
		if b.effects[w[0]] == nil {
			b.effects[w[0]] = map[string]string{}
		}
		b.effects[w[0]][w[1]] = answer
	}
}

func (b *memoryTxBackend) CommittedEffects(_ context.Context, key string) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.effects[key]), nil
}

type memoryTxStore struct {
	*memory.Store
	b *memoryTxBackend
}

type memoryTxKey struct{}

func (s memoryTxStore) BeginTx(ctx context.Context, _ *persistence.Record) (context.Context, persistence.Tx, error) {
	tx := &memoryTx{s: s, writes: map[[2]string]string{}}
	return context.WithValue(ctx, memoryTxKey{}, tx), tx, nil
}

// memoryTx applies its writes with the completion, under the backend's
// lock, so that they are seen together.
type memoryTx struct {
	s      memoryTxStore
	mu     sync.Mutex
	writes map[[2]string]string
	ended  bool
}

func (tx *memoryTx) end() map[[2]string]string {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.ended {
		return nil
	}
	tx.ended = true
	return tx.writes
}

func (tx *memoryTx) Commit(ctx context.Context, rec *persistence.Record) error {
	writes := tx.end()
	if writes == nil {
		return errors.New("the transaction has ended")
	}
	b := tx.s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	err := tx.s.Update(ctx, rec)
	if err == nil || errors.Is(err, persistence.ErrResponseOmitted) {
		b.apply(writes)
	}
	if errors.Is(err, persistence.ErrFenced) {
		return err
	}
	if err != nil && !errors.Is(err, persistence.ErrResponseOmitted) {
		return &persistence.CommitCanceledError{Err: err}
	}
	return err
}

func (tx *memoryTx) Rollback(context.Context) error {
	tx.end()
	return nil
}

func txConfig(seed uint64) Config {
	return Config{
		Seed: seed, Clients: 8, Keys: 6, Envs: 3, CachedEnvs: 1, SkewBound: 5 * time.Millisecond,
		Timeout: 80 * time.Millisecond, Work: 2 * time.Millisecond, Overrun: 60 * time.Millisecond,
		Lease: 40 * time.Millisecond, LeasedEnvs: 1,
		Replays: 2, Rates: Rates{
			Duplicate: 0.3, Overrun: 0.15, KillAfter: 0.15, KillBefore: 0.1, LateEffect: 0.05,
			StoreFault: 0.1, LateWrite: 0.1, Panic: 0.05, HandlerError: 0.05, FailAfter: 0.05, Decline: 0.1, Large: 0.1,
		},
	}
}

func TestTransactionsThroughTheStack(t *testing.T) {
	t.Parallel()
	report, err := Run(t.Context(), txConfig(4), newMemoryTxBackend(false), WrapDriver{}, GuardDriver{}, HTTPDriver{})
	require.NoError(t, err)
	require.Empty(t, report.Violations, "report:\n%s", report)
	require.Equal(t, report.Keys, report.FinalKeys)
	require.Zero(t, report.Repeated, "report:\n%s", report)
	require.Positive(t, report.Counts["call_begin_ok"], "BeginTx reached the store")
	require.Positive(t, report.Counts["call_commit_ok"], "commits were recorded")
	require.Positive(t, report.Counts["call_commit_failed"], "faults reached commits")
	require.Positive(t, report.Counts[countAppliedLate+"commit_ok"]+report.Counts[countAppliedLate+"commit_fenced"],
		"commits were held and applied late; report:\n%s", report)
	require.Positive(t, report.Counts[faultKillAfter], "kills after the side effect")
}

// A side effect written outside the transaction repeats, and the checker
// of the transactional mode finds it.
func TestCheckerFindsASideEffectOutsideTheTransaction(t *testing.T) {
	t.Parallel()
	report, err := Run(t.Context(), txConfig(5), newMemoryTxBackend(true), WrapDriver{}, GuardDriver{})
	require.NoError(t, err)
	found := report.ViolationsByCheck()
	t.Logf("violations by check: %v", found)
	require.Positive(t, found[checkExactlyOnce], "the checker missed the bug; report:\n%s", report)
}
