package redis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

func newStore(t testing.TB, client redis.UniversalClient, optFns ...func(*redisstore.Options)) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, optFns...)
	require.NoError(t, err)
	return s
}

func withPrefix(prefix string) func(*redisstore.Options) {
	return func(o *redisstore.Options) { o.KeyPrefix = prefix }
}

// tokenField is the default name of the hash field of the owner token
// (Fields.Token).
const tokenField = "owner_token"

// testNow is a whole second, as the idempotency package sets ExpiresAt.
func testNow() time.Time { return time.Now().Truncate(time.Second) }

func completed(rec *persistence.Record, response string) *persistence.Record {
	c := *rec
	c.Status = persistence.StatusCompleted
	c.Response = []byte(response)
	return &c
}

func requireRecord(t *testing.T, want, got *persistence.Record) {
	t.Helper()
	require.NotNil(t, got)
	if diff := recordtest.Diff(got, want); diff != "" {
		t.Fatalf("record differs:\n%s", diff)
	}
}

// requireFailure checks that err is a failure of the store, not one of the
// answers of the contract (conflict, fenced, not found).
func requireFailure(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.NotErrorIs(t, err, persistence.ErrConflict)
	require.NotErrorIs(t, err, persistence.ErrFenced)
	require.NotErrorIs(t, err, persistence.ErrNotFound)
	var conflict *persistence.ConflictError
	require.False(t, errors.As(err, &conflict), "error %v is a *persistence.ConflictError", err)
	require.True(t, strings.HasPrefix(err.Error(), "persistence/redis: "), "error %q lacks the package prefix", err)
}

func TestConformance(t *testing.T) {
	srv := redisserver.Start(t)
	shared := newStore(t, srv.NewClient())
	storetest.Run(t, func(*testing.T) persistence.Store { return shared })
}

func TestConformanceKeyPrefix(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	// Once the suite's parallel subtests are done, every key they wrote
	// carries the prefix.
	t.Cleanup(func() {
		keys, err := client.Keys(context.Background(), "*").Result()
		require.NoError(t, err)
		require.NotEmpty(t, keys)
		for _, k := range keys {
			require.True(t, strings.HasPrefix(k, "idempotency:storetest."), "key %q", k)
		}
	})
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return newStore(t, client, withPrefix("idempotency:"))
	})
}

func TestConformanceRenamedFields(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient(), func(o *redisstore.Options) {
		o.Fields = redisstore.Fields{
			Status:               "st",
			Expiration:           "ttl",
			InProgressExpiration: "ip_ttl",
			Validation:           "hash",
			Data:                 "body",
			Token:                "owner",
			ErrorType:            "etype",
			ErrorMessage:         "emsg",
			ResponseOmitted:      "omitted",
		}
	})
	storetest.Run(t, func(*testing.T) persistence.Store { return store })
}

// TestHashLayout pins the documented field names and encodings, which
// operators read with redis-cli.
func TestHashLayout(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	store := newStore(t, client, withPrefix("idem:"))
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0)

	rec := &persistence.Record{
		Key:                 "orders.handler#abc",
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour),
		InProgressExpiresAt: now.Add(1234 * time.Millisecond),
		PayloadHash:         "h",
		Token:               "t1",
	}
	require.NoError(t, store.Put(ctx, rec, now))
	require.Equal(t, "idem:orders.handler#abc", store.RedisKey(rec.Key))
	got, err := client.HGetAll(ctx, "idem:orders.handler#abc").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"status":                 "INPROGRESS",
		"expiration":             "1800003600",
		"in_progress_expiration": "1800000001234",
		"validation":             "h",
		"owner_token":            "t1",
	}, got)

	done := *rec
	done.Status = persistence.StatusCompleted
	done.ErrorType = "CardDeclinedError"
	done.ErrorMessage = "declined"
	done.ResponseOmitted = true
	require.NoError(t, store.Update(ctx, &done))
	got, err = client.HGetAll(ctx, "idem:orders.handler#abc").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"status":                 "COMPLETED",
		"expiration":             "1800003600",
		"in_progress_expiration": "1800000001234",
		"validation":             "h",
		"owner_token":            "t1",
		"error_type":             "CardDeclinedError",
		"error_message":          "declined",
		"response_omitted":       "1",
	}, got)
}

// TestKeyExpiry checks that the Redis key expires when the record does, after
// Put and after Update.
func TestKeyExpiry(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	store := newStore(t, client, withPrefix("p:"))
	ctx := t.Context()
	now := testNow()
	redisKey := func(rec *persistence.Record) string { return store.RedisKey(rec.Key) }

	requireExpiry := func(t *testing.T, rec *persistence.Record) {
		t.Helper()
		// PTTL, the time left, is positive and at most the time until
		// ExpiresAt measured before it (plus Redis's rounding).
		before := time.Until(rec.ExpiresAt)
		ttl, err := client.PTTL(ctx, redisKey(rec)).Result()
		require.NoError(t, err)
		require.Positive(t, ttl)
		require.LessOrEqual(t, ttl, before+time.Millisecond)

		// PEXPIRETIME (Redis 7) gives the expiry itself.
		at, err := client.PExpireTime(ctx, redisKey(rec)).Result()
		if err != nil && strings.Contains(err.Error(), "unknown command") {
			t.Logf("no PEXPIRETIME on this server: %v", err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, rec.ExpiresAt.UnixMilli(), at.Milliseconds())
	}

	rec := recordtest.InProgress("expiry#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, rec, now))
	requireExpiry(t, rec)

	done := completed(rec, `"ok"`)
	done.ExpiresAt = now.Add(2 * time.Hour)
	require.NoError(t, store.Update(ctx, done))
	requireExpiry(t, done)

	// A Put over an expired record sets the new record's expiry.
	later := now.Add(3 * time.Hour)
	next := recordtest.InProgress(rec.Key, later)
	require.NoError(t, store.Put(ctx, next, later))
	requireExpiry(t, next)
}

// TestLivenessBoundaries checks that the reservation script decides
// liveness exactly as persistence.Record.Live does, at and around the
// expiry times, with a caller's time that has nanoseconds.
func TestLivenessBoundaries(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	ctx := t.Context()
	// An hour ahead, so that Redis keeps every key while the test runs.
	base := testNow().Add(time.Hour)
	inProgressUntil := base.Add(30*time.Second + 123*time.Millisecond)

	type held struct {
		status             persistence.Status
		expires, ipExpires time.Time
	}
	completedRec := held{persistence.StatusCompleted, base, base.Add(-time.Minute)}
	inProgressRec := held{persistence.StatusInProgress, base.Add(time.Hour), inProgressUntil}
	noIPExpiry := held{persistence.StatusInProgress, base, time.Time{}}
	ipAfterExpiry := held{persistence.StatusInProgress, base, base.Add(time.Minute)}
	cases := []struct {
		held held
		now  time.Time
	}{
		{completedRec, base.Add(-time.Nanosecond)},
		{completedRec, base},
		{completedRec, base.Add(time.Nanosecond)},
		{completedRec, base.Add(999_999 * time.Nanosecond)},
		{completedRec, base.Add(time.Millisecond)},
		{completedRec, base.Add(time.Second)},
		{inProgressRec, inProgressUntil.Add(-time.Nanosecond)},
		{inProgressRec, inProgressUntil},
		{inProgressRec, inProgressUntil.Add(time.Nanosecond)},
		{inProgressRec, inProgressUntil.Add(time.Millisecond)},
		{noIPExpiry, base.Add(-time.Second)},
		{noIPExpiry, base},
		{noIPExpiry, base.Add(time.Nanosecond)},
		{ipAfterExpiry, base},
		{ipAfterExpiry, base.Add(time.Nanosecond)},
	}
	for i, tc := range cases {
		rec := recordtest.InProgress("live#"+rand.Text(), base)
		rec.Status, rec.ExpiresAt, rec.InProgressExpiresAt = tc.held.status, tc.held.expires, tc.held.ipExpires
		require.NoError(t, store.Put(ctx, rec, base.Add(-time.Hour)))

		probe := recordtest.InProgress(rec.Key, tc.now)
		probe.ExpiresAt = base.Add(2 * time.Hour)
		err := store.Put(ctx, probe, tc.now)
		if rec.Live(tc.now) {
			var conflict *persistence.ConflictError
			require.ErrorAs(t, err, &conflict, "case %d: %s record, now %v: live, the Put must conflict", i, rec.Status, tc.now)
			requireRecord(t, rec, conflict.Existing)
		} else {
			require.NoError(t, err, "case %d: %s record, now %v: not live, the Put must succeed", i, rec.Status, tc.now)
		}
	}
}

// TestPastExpiryIsEvicted writes a record whose ExpiresAt has passed (the
// zero time included): Redis deletes it at once, which the contract allows
// for records that are not live.
func TestPastExpiryIsEvicted(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	ctx := t.Context()
	now := testNow()
	for _, expires := range []time.Time{{}, now.Add(-time.Hour)} {
		rec := recordtest.InProgress("past#"+rand.Text(), now)
		rec.ExpiresAt = expires
		require.NoError(t, store.Put(ctx, rec, now))
		_, err := store.Get(ctx, rec.Key)
		require.ErrorIs(t, err, persistence.ErrNotFound)
	}
}

func TestParallelPutsSeparateClients(t *testing.T) {
	srv := redisserver.Start(t)
	const n = 50
	stores := make([]*redisstore.Store, n)
	for i := range stores {
		c := srv.NewClient()
		require.NoError(t, c.Ping(t.Context()).Err()) // connect before the race
		stores[i] = newStore(t, c)
	}
	now := testNow()
	key := "race#" + rand.Text()
	records := make([]*persistence.Record, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		records[i] = recordtest.InProgress(key, now)
		wg.Go(func() {
			<-start
			errs[i] = stores[i].Put(t.Context(), records[i], now)
		})
	}
	close(start)
	wg.Wait()

	var winner *persistence.Record
	for i, err := range errs {
		if err == nil {
			require.Nil(t, winner, "two Puts succeeded")
			winner = records[i]
		}
	}
	require.NotNil(t, winner, "no Put succeeded")
	for _, err := range errs {
		if err == nil {
			continue
		}
		var conflict *persistence.ConflictError
		require.ErrorAs(t, err, &conflict)
		requireRecord(t, winner, conflict.Existing)
	}
	got, err := stores[0].Get(t.Context(), key)
	require.NoError(t, err)
	requireRecord(t, winner, got)
}

// TestServerRestartBetweenPutAndUpdate loses the data between the
// reservation and the completion, as a failover to a replica that had not
// received the write does: the completion must not pretend to succeed.
func TestServerRestartBetweenPutAndUpdate(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	ctx := t.Context()
	now := testNow()
	rec := recordtest.InProgress("restart#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, rec, now))

	srv.Restart()

	// go-redis reconnects, the script cache is empty (NOSCRIPT, then EVAL),
	// and the record is gone: the Update is fenced.
	err := store.Update(ctx, completed(rec, `"done"`))
	require.ErrorIs(t, err, persistence.ErrFenced)
	_, err = store.Get(ctx, rec.Key)
	require.ErrorIs(t, err, persistence.ErrNotFound)

	// The key is free again.
	again := recordtest.InProgress(rec.Key, now)
	require.NoError(t, store.Put(ctx, again, now))
	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, again, got)
}

// TestScriptFlush empties the server's script cache between every two calls,
// as a failover to a node that never ran the scripts does.
func TestScriptFlush(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	rt := countRoundTrips(t, client)
	store := newStore(t, client)
	ctx := t.Context()
	now := testNow()
	flush := func() {
		t.Helper()
		require.NoError(t, client.ScriptFlush(ctx).Err())
		rt.reset()
	}

	rec := recordtest.InProgress("flush#"+rand.Text(), now)
	flush()
	require.NoError(t, store.Put(ctx, rec, now))
	rt.require(t, "Put after SCRIPT FLUSH", "evalsha", "eval")

	flush()
	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, rec, got)
	rt.require(t, "Get after SCRIPT FLUSH", "evalsha", "eval")

	done := completed(rec, `{"id":1}`)
	flush()
	require.NoError(t, store.Update(ctx, done))
	rt.require(t, "Update after SCRIPT FLUSH", "evalsha", "eval")

	flush()
	var conflict *persistence.ConflictError
	require.ErrorAs(t, store.Put(ctx, recordtest.InProgress(rec.Key, now), now), &conflict)
	requireRecord(t, done, conflict.Existing)
	rt.require(t, "conflicting Put after SCRIPT FLUSH", "evalsha", "eval")

	// A release applies to a reservation: a new key's.
	held := recordtest.InProgress("flush#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, held, now))
	flush()
	require.NoError(t, store.Delete(ctx, held.Key, held.Token))
	rt.require(t, "Delete after SCRIPT FLUSH", "evalsha", "eval")

	// Once reloaded, a script costs one round trip again.
	require.NoError(t, store.Put(ctx, held, now))
	rt.reset()
	require.NoError(t, store.Delete(ctx, held.Key, held.Token))
	rt.require(t, "Delete after its reload", "evalsha")
}

func TestRoundTrips(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	rt := countRoundTrips(t, client)
	store := newStore(t, client)
	ctx := t.Context()
	now := testNow()

	// Load the scripts once, so that the counts are the steady state.
	warm := recordtest.InProgress("warm#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, warm, now))
	_, _ = store.Get(ctx, warm.Key)
	require.NoError(t, store.Delete(ctx, warm.Key, warm.Token))
	require.NoError(t, store.Put(ctx, warm, now))
	require.NoError(t, store.Update(ctx, completed(warm, "1")))

	rec := recordtest.InProgress("rt#"+rand.Text(), now)
	rt.reset()
	require.NoError(t, store.Put(ctx, rec, now))
	rt.require(t, "Put of a new key", "evalsha")

	rt.reset()
	var conflict *persistence.ConflictError
	require.ErrorAs(t, store.Put(ctx, recordtest.InProgress(rec.Key, now), now), &conflict)
	requireRecord(t, rec, conflict.Existing)
	rt.require(t, "Put over a live record", "evalsha")

	done := completed(rec, `{"ok":true}`)
	rt.reset()
	require.NoError(t, store.Update(ctx, done))
	rt.require(t, "Update", "evalsha")

	rt.reset()
	require.ErrorAs(t, store.Put(ctx, recordtest.InProgress(rec.Key, now), now), &conflict)
	requireRecord(t, done, conflict.Existing)
	rt.require(t, "Put over a completed record (a replay)", "evalsha")

	rt.reset()
	got, err := store.Get(ctx, rec.Key)
	require.NoError(t, err)
	requireRecord(t, done, got)
	rt.require(t, "Get", "evalsha")

	rt.reset()
	require.ErrorIs(t, store.Delete(ctx, rec.Key, rec.Token), persistence.ErrFenced, "a release must not delete a result")
	rt.require(t, "Delete of a completed record, refused", "evalsha")
}

// roundTrips counts, for one client, the commands go-redis processes (a
// process hook) and the requests it writes to the network (a wrapped
// connection), so that retries would show too.
type roundTrips struct {
	mu     sync.Mutex
	cmds   []string
	writes int
}

func countRoundTrips(t *testing.T, client *redis.Client) *roundTrips {
	rt := &roundTrips{}
	client.AddHook(rt)
	// Open the connection (HELLO and the like) before counting.
	require.NoError(t, client.Ping(t.Context()).Err())
	rt.reset()
	return rt
}

func (rt *roundTrips) reset() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.cmds, rt.writes = nil, 0
}

// require checks the commands processed and the requests written since the
// last reset.
func (rt *roundTrips) require(t *testing.T, what string, want ...string) {
	t.Helper()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	require.Equal(t, want, rt.cmds, "%s: commands", what)
	require.Equal(t, len(want), rt.writes, "%s: requests written", what)
}

// requireScripts checks only the script commands processed since the last
// reset: when connections are being replaced, go-redis's retries and
// connection set-up (HELLO, CLIENT SETINFO) add more.
func (rt *roundTrips) requireScripts(t *testing.T, what string, want ...string) {
	t.Helper()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var scripts []string
	for _, c := range rt.cmds {
		if c == "evalsha" || c == "eval" {
			scripts = append(scripts, c)
		}
	}
	require.Equal(t, want, scripts, "%s: script commands", what)
}

func (rt *roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, rt: rt}, nil
	}
}

func (rt *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		rt.mu.Lock()
		rt.cmds = append(rt.cmds, cmd.Name())
		rt.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (rt *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rt.mu.Lock()
		rt.cmds = append(rt.cmds, "pipeline")
		rt.mu.Unlock()
		return next(ctx, cmds)
	}
}

type countingConn struct {
	net.Conn
	rt *roundTrips
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.rt.mu.Lock()
	c.rt.writes++
	c.rt.mu.Unlock()
	return c.Conn.Write(b)
}

func TestConnectionRefused(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient())
	// The other operations go through a client that does not retry, to keep
	// the test short: go-redis's default retries take about two seconds.
	noRetry := newStore(t, srv.NewClient(func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialerRetries = 1
	}))
	ctx := t.Context()
	now := testNow()
	rec := recordtest.InProgress("refused#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, rec, now))
	require.NoError(t, noRetry.Delete(ctx, "refused#connect", "t"))
	srv.Stop()

	err := store.Put(ctx, recordtest.InProgress(rec.Key, now), now)
	requireFailure(t, err)
	var opErr *net.OpError
	require.ErrorAs(t, err, &opErr, "Put: %v", err)

	requireFailure(t, noRetry.Put(ctx, recordtest.InProgress(rec.Key, now), now))
	_, err = noRetry.Get(ctx, rec.Key)
	requireFailure(t, err)
	requireFailure(t, noRetry.Update(ctx, completed(rec, "1")))
	requireFailure(t, noRetry.Delete(ctx, rec.Key, rec.Token))
}

// TestTimeout freezes the server, so that requests get no answer, and checks
// that Put fails with a timeout, not a conflict, both with the client's
// ReadTimeout and with a context deadline; and that once the server is back,
// the key is not locked past its in-progress expiry.
func TestTimeout(t *testing.T) {
	srv := redisserver.Start(t)
	now := testNow()
	tests := []struct {
		name string
		opts func(*redis.Options)
		ctx  func(t *testing.T) context.Context
		is   func(t *testing.T, err error)
	}{
		{
			name: "ReadTimeout",
			opts: func(o *redis.Options) { o.ReadTimeout = 100 * time.Millisecond },
			ctx:  func(t *testing.T) context.Context { return t.Context() },
			is: func(t *testing.T, err error) {
				var netErr net.Error
				require.ErrorAs(t, err, &netErr)
				require.True(t, netErr.Timeout(), "%v is not a timeout", err)
			},
		},
		{
			name: "ContextDeadline",
			opts: func(o *redis.Options) { o.ContextTimeoutEnabled = true },
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			is: func(t *testing.T, err error) {
				var netErr net.Error
				if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &netErr) && netErr.Timeout()) {
					t.Fatalf("%v is neither context.DeadlineExceeded nor a timeout", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t, srv.NewClient(tc.opts))
			rec := recordtest.InProgress("timeout#"+rand.Text(), now)
			// Connect and load the script first, so that the frozen server
			// is met by EVALSHA on an open connection.
			_, err := store.Get(t.Context(), rec.Key)
			require.ErrorIs(t, err, persistence.ErrNotFound)

			srv.Freeze()
			err = store.Put(tc.ctx(t), rec, now)
			srv.Thaw()
			requireFailure(t, err)
			tc.is(t, err)

			// The server may still apply the Put it received (its reply was
			// lost): the key then holds rec until its in-progress expiry. A
			// reservation after that expiry succeeds whichever came first.
			later := rec.InProgressExpiresAt.Add(time.Millisecond)
			next := recordtest.InProgress(rec.Key, later)
			require.NoError(t, store.Put(t.Context(), next, later))
			got, err := store.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			requireRecord(t, next, got)
		})
	}
}

// TestReadOnlyReplica points a store at a replica: every operation fails
// with READONLY, even those that would not write (a conflict, a read), and
// nothing is written.
func TestReadOnlyReplica(t *testing.T) {
	primary := redisserver.Start(t)
	replica := redisserver.StartReplica(t, primary)
	ctx := t.Context()
	now := testNow()

	onPrimary := newStore(t, primary.NewClient())
	held := recordtest.InProgress("replica#held-"+rand.Text(), now)
	require.NoError(t, onPrimary.Put(ctx, held, now))

	replicaClient := replica.NewClient()
	// Wait until the replica has the record, so that a Put through it would
	// otherwise be a conflict.
	require.Eventually(t, func() bool {
		n, err := replicaClient.Exists(ctx, held.Key).Result()
		return err == nil && n == 1
	}, 30*time.Second, 10*time.Millisecond)

	// go-redis retries READONLY (three times by default, with backoff); this
	// client does not, to keep the test short.
	onReplica := newStore(t, replica.NewClient(func(o *redis.Options) { o.MaxRetries = -1 }))
	requireReadOnly := func(t *testing.T, err error) {
		t.Helper()
		requireFailure(t, err)
		require.True(t, redis.IsReadOnlyError(err), "%v is not READONLY", err)
	}

	fresh := recordtest.InProgress("replica#fresh-"+rand.Text(), now)
	requireReadOnly(t, onReplica.Put(ctx, fresh, now))
	requireReadOnly(t, onReplica.Put(ctx, recordtest.InProgress(held.Key, now), now))
	_, err := onReplica.Get(ctx, held.Key)
	requireReadOnly(t, err)
	_, err = onReplica.Get(ctx, fresh.Key)
	requireReadOnly(t, err)
	requireReadOnly(t, onReplica.Update(ctx, completed(held, "1")))
	requireReadOnly(t, onReplica.Update(ctx, completed(fresh, "1")))
	requireReadOnly(t, onReplica.Delete(ctx, held.Key, held.Token))

	// Nothing was written, on the replica or the primary.
	n, err := replicaClient.Exists(ctx, fresh.Key).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	got, err := onPrimary.Get(ctx, held.Key)
	require.NoError(t, err)
	requireRecord(t, held, got)
	_, err = onPrimary.Get(ctx, fresh.Key)
	require.ErrorIs(t, err, persistence.ErrNotFound)
}

// TestForeignKeys checks that keys holding something else are reported as
// errors and left alone.
func TestForeignKeys(t *testing.T) {
	srv := redisserver.Start(t)
	client := srv.NewClient()
	store := newStore(t, client)
	ctx := t.Context()
	now := testNow()

	require.NoError(t, client.Set(ctx, "string", "v", 0).Err())
	require.NoError(t, client.HSet(ctx, "hash", "name", "v").Err())
	for _, key := range []string{"string", "hash"} {
		t.Run(key, func(t *testing.T) {
			err := store.Put(ctx, recordtest.InProgress(key, now), now)
			requireFailure(t, err)
			require.Contains(t, err.Error(), "WRONGTYPE")
			_, err = store.Get(ctx, key)
			requireFailure(t, err)
			if key == "string" {
				requireFailure(t, store.Update(ctx, recordtest.InProgress(key, now)))
				requireFailure(t, store.Delete(ctx, key, "t"))
			} else {
				// A hash without our token is someone else's record.
				require.ErrorIs(t, store.Update(ctx, recordtest.InProgress(key, now)), persistence.ErrFenced)
				require.ErrorIs(t, store.Delete(ctx, key, "t"), persistence.ErrFenced)
			}
		})
	}
	v, err := client.Get(ctx, "string").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)
	h, err := client.HGetAll(ctx, "hash").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"name": "v"}, h)
}

func TestMaxResponseSize(t *testing.T) {
	srv := redisserver.Start(t)
	store := newStore(t, srv.NewClient(), func(o *redisstore.Options) { o.MaxResponseSize = 8 })
	ctx := t.Context()
	now := testNow()

	small := recordtest.InProgress("max#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, small, now))
	require.NoError(t, store.Update(ctx, completed(small, "12345678")))

	big := recordtest.InProgress("max#"+rand.Text(), now)
	require.NoError(t, store.Put(ctx, big, now))
	err := store.Update(ctx, completed(big, "123456789"))
	require.ErrorIs(t, err, persistence.ErrResponseOmitted)
	got, err := store.Get(ctx, big.Key)
	require.NoError(t, err)
	assert.Equal(t, persistence.StatusCompleted, got.Status)
	assert.True(t, got.ResponseOmitted)
	assert.Empty(t, got.Response)

	// A fenced Update is fenced, whatever the size.
	other := completed(big, "123456789")
	other.Token = "other"
	require.ErrorIs(t, store.Update(ctx, other), persistence.ErrFenced)
}

func TestNewValidates(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })

	_, err := redisstore.New(nil)
	require.ErrorContains(t, err, "nil client")
	_, err = redisstore.New(client, func(o *redisstore.Options) { o.MaxResponseSize = -1 })
	require.ErrorContains(t, err, "MaxResponseSize")
	_, err = redisstore.New(client, func(o *redisstore.Options) { o.Fields.Data = "status" })
	require.ErrorContains(t, err, `Fields.Status and Fields.Data are both "status"`)
	_, err = redisstore.New(client, func(o *redisstore.Options) { o.Fields.Token = "retrysafe:primary-check" })
	require.ErrorContains(t, err, "reserved")

	s, err := redisstore.New(client)
	require.NoError(t, err)
	require.Equal(t, "k", s.RedisKey("k"))
}
