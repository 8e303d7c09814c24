package chaos

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/persistence"
)

// These tests run the harness over stores with deliberate bugs, each of
// which breaks one part of the guarantee, and require the checker to find
// it: a harness that cannot fail proves nothing.

// brokenBackend is the memory backend with a broken store in front.
type brokenBackend struct {
	Backend
	wrap func(persistence.Store) persistence.Store
}

func (b brokenBackend) NewStore(e *Env) (persistence.Store, error) {
	s, err := b.Backend.NewStore(e)
	return b.wrap(s), err
}

// noExclusion lets a reservation take over a live in-progress record.
type noExclusion struct{ persistence.Store }

func (s noExclusion) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	if old, err := s.Get(ctx, rec.Key); err == nil && old.Status == persistence.StatusInProgress {
		_ = s.Delete(ctx, rec.Key, old.Token)
	}
	return s.Store.Put(ctx, rec, now)
}

// unfenced completes a record whatever token it carries.
type unfenced struct{ persistence.Store }

func (s unfenced) Update(ctx context.Context, rec *persistence.Record) error {
	if old, err := s.Get(ctx, rec.Key); err == nil && old.Token != rec.Token {
		stolen := *rec
		stolen.Token = old.Token
		return s.Store.Update(ctx, &stolen)
	}
	return s.Store.Update(ctx, rec)
}

// forgetful acknowledges every completion without storing it: the
// reservation stays in progress until it lapses. (Deleting the completed
// record instead would need a release that applies to a completed record,
// which the protocol refuses.)
type forgetful struct{ persistence.Store }

func (s forgetful) Update(ctx context.Context, rec *persistence.Record) error {
	if rec.Status == persistence.StatusCompleted {
		return nil
	}
	return s.Store.Update(ctx, rec)
}

// corrupting replays a response that is not the stored one.
type corrupting struct{ persistence.Store }

func (s corrupting) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	err := s.Store.Put(ctx, rec, now)
	var conflict *persistence.ConflictError
	if errors.As(err, &conflict) && conflict.Existing != nil && len(conflict.Existing.Response) > 0 {
		bad := *conflict.Existing
		bad.Response = append([]byte(nil), bad.Response...)
		bad.Response[len(bad.Response)-3] ^= 1 // inside the blob
		return &persistence.ConflictError{Existing: &bad}
	}
	return err
}

// neverLapses treats in-progress records as live until their record
// expiry, ignoring the in-progress expiry: a crashed invocation blocks its
// key for the whole expiry window.
type neverLapses struct{ persistence.Store }

func (s neverLapses) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	if old, err := s.Get(ctx, rec.Key); err == nil && old.Status == persistence.StatusInProgress && !old.ExpiresAt.Before(now) {
		return &persistence.ConflictError{Existing: old}
	}
	return s.Store.Put(ctx, rec, now)
}

// tokenFenced is a store whose fenced writes check the owner token alone,
// not the status: a renewal that arrives after its own completion makes
// the completed record in progress again.
type tokenFenced struct {
	mu      sync.Mutex
	records map[string]persistence.Record
}

func (s *tokenFenced) Name() string                             { return "token-fenced" }
func (s *tokenFenced) NewStore(*Env) (persistence.Store, error) { return s, nil }
func (s *tokenFenced) Disruptions() []Disruption                { return nil }

func (s *tokenFenced) Put(_ context.Context, rec *persistence.Record, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.records[rec.Key]; ok && old.Live(now) {
		return &persistence.ConflictError{Existing: &old}
	}
	s.records[rec.Key] = *rec
	return nil
}

func (s *tokenFenced) Get(_ context.Context, key string) (*persistence.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[key]
	if !ok {
		return nil, persistence.ErrNotFound
	}
	return &old, nil
}

func (s *tokenFenced) Update(_ context.Context, rec *persistence.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.records[rec.Key]; !ok || old.Token != rec.Token {
		return persistence.ErrFenced
	}
	r := *rec
	if len(r.Response) > ResponseLimit {
		r.Response, r.ResponseOmitted = nil, true
		s.records[rec.Key] = r
		return persistence.ErrResponseOmitted
	}
	s.records[rec.Key] = r
	return nil
}

func (s *tokenFenced) Delete(_ context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[key]
	if ok && old.Token != token {
		return persistence.ErrFenced
	}
	delete(s.records, key)
	return nil
}

func TestCheckerFindsBrokenStores(t *testing.T) {
	t.Parallel()
	base := Config{
		Seed:        1,
		Clients:     4,
		Keys:        12,
		Envs:        3,
		SkewBound:   5 * time.Millisecond,
		Timeout:     80 * time.Millisecond,
		Expiry:      time.Hour,
		Work:        2 * time.Millisecond,
		Overrun:     60 * time.Millisecond,
		MaxAttempts: 30,
		Replays:     2,
	}
	for _, tc := range []struct {
		name    string
		wrap    func(persistence.Store) persistence.Store
		rates   Rates
		tune    func(*Config)
		backend func() Backend // instead of the memory store behind wrap
		want    []string       // any of these checks
	}{{
		name:  "no exclusion",
		wrap:  func(s persistence.Store) persistence.Store { return noExclusion{s} },
		rates: Rates{Duplicate: 0.7},
		want:  []string{checkExclusion},
	}, {
		name:  "unfenced completion",
		wrap:  func(s persistence.Store) persistence.Store { return unfenced{s} },
		rates: Rates{Overrun: 0.5},
		want:  []string{checkAtMostOnce, checkConsistency},
	}, {
		name:  "lost completions",
		wrap:  func(s persistence.Store) persistence.Store { return forgetful{s} },
		rates: Rates{Duplicate: 0.01},
		want:  []string{checkExplained},
	}, {
		name:  "corrupted replays",
		wrap:  func(s persistence.Store) persistence.Store { return corrupting{s} },
		rates: Rates{Duplicate: 0.3},
		want:  []string{checkAnswer},
	}, {
		name:  "reservations that never lapse",
		wrap:  func(s persistence.Store) persistence.Store { return neverLapses{s} },
		rates: Rates{KillBefore: 0.5},
		tune:  func(c *Config) { c.MaxAttempts = 6 },
		// The library itself refuses to report a lapsed reservation as in
		// progress (it answers StoreError), so keys starve.
		want: []string{checkBlocking, checkLiveness},
	}, {
		name:    "renewals fenced on the token alone",
		backend: func() Backend { return &tokenFenced{records: map[string]persistence.Record{}} },
		rates:   Rates{LateWrite: 0.3},
		tune:    func(c *Config) { c.Lease, c.LeasedEnvs = 40*time.Millisecond, 2 },
		want:    []string{checkReopened, checkAtMostOnce, checkExclusion, checkExplained},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := base
			cfg.Rates = tc.rates
			if tc.tune != nil {
				tc.tune(&cfg)
			}
			var backend Backend
			if tc.backend != nil {
				backend = tc.backend()
			} else {
				backend = brokenBackend{Backend: Memory(), wrap: tc.wrap}
			}
			report, err := Run(t.Context(), cfg, backend, WrapDriver{}, GuardDriver{})
			require.NoError(t, err)
			found := report.ViolationsByCheck()
			t.Logf("violations by check: %v", found)
			n := 0
			for _, c := range tc.want {
				n += found[c]
			}
			require.Positive(t, n, "the checker missed the bug; report:\n%s", report)
		})
	}
}

// The same runs over the correct memory store find nothing: the checker
// does not flag the documented limits, nor what writes applied late do to
// a store that follows the protocol.
func TestCheckerAcceptsTheMemoryStore(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Seed: 2, Clients: 4, Keys: 15, Envs: 3, SkewBound: 5 * time.Millisecond,
		Timeout: 80 * time.Millisecond, Work: 2 * time.Millisecond, Overrun: 60 * time.Millisecond,
		Lease: 40 * time.Millisecond, LeasedEnvs: 1,
		Replays: 2, Rates: Rates{
			Duplicate: 0.3, Overrun: 0.15, KillAfter: 0.15, KillBefore: 0.1, LateEffect: 0.05,
			StoreFault: 0.1, LateWrite: 0.1, Panic: 0.05, HandlerError: 0.05, FailAfter: 0.05, Decline: 0.1, Large: 0.1,
		},
	}
	report, err := Run(t.Context(), cfg, Memory(), WrapDriver{}, GuardDriver{})
	require.NoError(t, err)
	require.Empty(t, report.Violations, "report:\n%s", report)
	require.Positive(t, report.Repeated, "the faults should have caused repetitions within the limits")
	require.Equal(t, report.Keys, report.FinalKeys)
	require.Positive(t, report.Events["renewed"], "leases were renewed")
	require.Positive(t, report.Counts[faultStoreLate], "writes were applied late")
}

// nonAtomicBackend is the transactional DynamoDB Local backend with a
// store that commits the staged writes on their own, then the completion:
// a function overtaken after its deadline still writes its side effect.
type nonAtomicBackend struct{ *dynamoBackend }

func (b nonAtomicBackend) NewStore(e *Env) (persistence.Store, error) {
	s, err := b.dynamoBackend.NewStore(e)
	if err != nil {
		return nil, err
	}
	return nonAtomic{Committer: s.(persistence.Committer), client: b.reader}, nil
}

type nonAtomic struct {
	persistence.Committer
	client *awsdynamodb.Client
}

func (s nonAtomic) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	items := make([]types.TransactWriteItem, len(writes))
	for i, w := range writes {
		items[i] = w.(types.TransactWriteItem)
	}
	if len(items) > 0 {
		if _, err := s.client.TransactWriteItems(ctx, &awsdynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			return err
		}
	}
	return s.Update(ctx, rec)
}

// The checker of the transactional mode finds side effects that commit
// without their completion.
func TestCheckerFindsANonAtomicCommit(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Seed: 3, Clients: 4, Keys: 12, Envs: 3, SkewBound: 5 * time.Millisecond,
		Timeout: 150 * time.Millisecond, Expiry: time.Hour, Work: 2 * time.Millisecond, Overrun: 100 * time.Millisecond,
		MaxAttempts: 30, Replays: 2, Rates: Rates{Overrun: 0.5},
	}
	tx := DynamoDBLocalTransactions(t).(*dynamoBackend)
	report, err := Run(t.Context(), cfg, nonAtomicBackend{tx}, WrapDriver{}, GuardDriver{})
	require.NoError(t, err)
	found := report.ViolationsByCheck()
	t.Logf("violations by check: %v", found)
	require.Positive(t, found[checkExactlyOnce], "the checker missed the bug; report:\n%s", report)

	// The same run over the store's own commit (with another seed, for
	// keys of its own in the same tables) finds nothing.
	cfg.Seed++
	report, err = Run(t.Context(), cfg, tx, WrapDriver{}, GuardDriver{})
	require.NoError(t, err)
	require.Empty(t, report.Violations, "report:\n%s", report)
	require.Positive(t, report.Counts[faultOverrun], "overruns were injected")
}
