package linearize

import (
	"context"
	"errors"
	"maps"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/redis/go-redis/v9"

	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

func TestMain(m *testing.M) { backends.Main(m) }

// long reports whether the long runs are asked for (make chaos).
var long = os.Getenv("LINEARIZE_LONG") == "1"

// checkTimeout bounds the check of one key. Each key's history is a few
// dozen calls, which Porcupine decides in milliseconds.
const checkTimeout = time.Minute

// dir is where visualizations go.
func dir(t *testing.T) string {
	if d := os.Getenv("LINEARIZE_DIR"); d != "" {
		return d
	}
	return t.TempDir()
}

// TestStoresAreLinearizable: on every store, the histories of many
// clients per key, with faults at the store interface and in the
// server, are linearizable.
func TestStoresAreLinearizable(t *testing.T) {
	for _, b := range servers {
		t.Run(b.name, func(t *testing.T) {
			w := Workload{Prefix: "linearize." + t.Name(), Keys: 100, Clients: 3, Calls: 3, Workers: 4, Seed: uint64(time.Now().UnixNano()), Faults: true}
			if long {
				w.Keys, w.Calls, w.Workers = 3300, 4, 8
			}
			t.Logf("seed %d", w.Seed)
			srv := b.start(t, w.Seed)
			w.Disrupt = srv.disrupt
			h, stats := w.Run(t.Context(), srv.open)
			srv.wait()
			res, err := Check(h, checkTimeout, dir(t))
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(stats.Faults, srv.faults())
			t.Logf("%d calls on %d keys checked in %v (%d with an unknown outcome); faults %v", res.Calls, res.Keys, res.Took, res.Unknown, stats.Faults)
		})
	}
}

// server is a store's server, with its faults.
type server struct {
	open    func() persistence.Store
	disrupt func(k int) // injects the server's faults before key k
	wait    func()      // waits for the faults to end
	faults  func() map[string]int
}

var servers = []struct {
	name  string
	start func(t *testing.T, seed uint64) server
}{
	{"memory", func(t *testing.T, _ uint64) server {
		store := memory.New()
		return server{open: func() persistence.Store { return store }}.orNone()
	}},
	{"redis", startRedis},
	{"dynalite", func(t *testing.T, seed uint64) server {
		srv := dynalite.Shared(t)
		return dynamoServer(t, seed, srv.NewTable, srv.NewClient)
	}},
	{"dynamodb-local", func(t *testing.T, seed uint64) server {
		srv := backends.DynamoDBLocal(t)
		return dynamoServer(t, seed, srv.NewTable, srv.NewClient)
	}},
}

// orNone fills in a server without faults of its own.
func (s server) orNone() server {
	if s.disrupt == nil {
		s.disrupt = func(int) {}
	}
	if s.wait == nil {
		s.wait = func() {}
	}
	if s.faults == nil {
		s.faults = func() map[string]int { return nil }
	}
	return s
}

// startRedis starts a redis-server that stalls (SIGSTOP) for 100ms
// before every 20th key. Requests time out, and some reach the server
// after their client gave up.
func startRedis(t *testing.T, _ uint64) server {
	srv := redisserver.Start(t)
	var (
		stalls atomic.Int64
		wg     sync.WaitGroup
	)
	return server{
		open: func() persistence.Store {
			store, err := redisstore.New(srv.NewClient(func(o *redis.Options) {
				o.ReadTimeout, o.WriteTimeout = 50*time.Millisecond, 50*time.Millisecond
			}))
			if err != nil {
				t.Fatal(err)
			}
			return store
		},
		disrupt: func(k int) {
			if k%20 != 19 {
				return
			}
			stalls.Add(1)
			wg.Go(func() {
				srv.Freeze()
				time.Sleep(100 * time.Millisecond) // the stall's length, not a wait for an event
				srv.Thaw()
			})
		},
		wait:   wg.Wait,
		faults: func() map[string]int { return map[string]int{"server stalled": int(stalls.Load())} },
	}
}

// dynamoServer opens stores on a new table of a DynamoDB server. Before
// each key, one or two HTTP attempts are refused, throttled, or lose
// their reply, and the SDK retries them.
func dynamoServer(t *testing.T, seed uint64,
	newTable func(testenv.TB, func(context.Context, *awsdynamodb.Client, string) error) string,
	newClient func(...func(*awsdynamodb.Options)) *awsdynamodb.Client) server {
	faults := &dynalite.Faults{}
	open := backends.DynamoStores(t, newTable, func(optFns ...func(*awsdynamodb.Options)) *awsdynamodb.Client {
		return newClient(append(optFns, faults.Register)...)
	})
	ops := []string{"PutItem", "UpdateItem", "DeleteItem", "GetItem"}
	kinds := []dynalite.FaultKind{dynalite.LostReply, dynalite.Refused, dynalite.Throttled}
	return server{
		open: open,
		disrupt: func(k int) {
			r := mrand.New(mrand.NewPCG(seed, uint64(k)))
			for range 1 + r.IntN(2) {
				faults.Add(ops[r.IntN(len(ops))], kinds[r.IntN(len(kinds))], 1)
			}
		},
		faults: func() map[string]int {
			m := map[string]int{}
			for _, k := range kinds {
				m["HTTP "+k.String()] = faults.Fired(k)
			}
			return m
		},
	}.orNone()
}

// TestBrokenStoresAreCaught: a store with a known bug fails the check.
func TestBrokenStoresAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(s *memory.Store) persistence.Store
	}{
		{"completion fenced on token only", func(s *memory.Store) persistence.Store { return tokenOnly{s} }},
		{"renewal that shortens the lease", func(s *memory.Store) persistence.Store { return shortening{s} }},
		{"release that deletes another's record", func(s *memory.Store) persistence.Store { return releasesAny{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := tc.wrap(memory.New())
			w := Workload{Prefix: "broken", Keys: 10, Clients: 2, Calls: 2, Workers: 2, Seed: 1}
			h, _ := w.Run(t.Context(), func() persistence.Store { return store })
			_, err := Check(h, checkTimeout, dir(t))
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("Check: %v, want a violation", err)
			}
			t.Log(v)
		})
	}
}

// tokenOnly fences completions and renewals on the token alone: a
// renewal that arrives after the completion reopens the record.
type tokenOnly struct{ *memory.Store }

func (s tokenOnly) Update(ctx context.Context, rec *persistence.Record) error {
	old, err := s.Get(ctx, rec.Key)
	if err == nil && old.Token == rec.Token && old.Status == persistence.StatusCompleted && rec.Status == persistence.StatusInProgress {
		if err := s.DeleteRecord(ctx, old); err != nil {
			return err
		}
		return s.Put(ctx, rec, time.Time{})
	}
	return s.Store.Update(ctx, rec)
}

// shortening applies a renewal older than the one applied.
type shortening struct{ *memory.Store }

func (s shortening) Update(ctx context.Context, rec *persistence.Record) error {
	old, err := s.Get(ctx, rec.Key)
	if err == nil && old.Token == rec.Token && old.Status == persistence.StatusInProgress && rec.Status == persistence.StatusInProgress &&
		old.InProgressExpiresAt.After(rec.InProgressExpiresAt) {
		if err := s.DeleteRecord(ctx, old); err != nil {
			return err
		}
		return s.Put(ctx, rec, time.Time{})
	}
	return s.Store.Update(ctx, rec)
}

// releasesAny releases any reservation, whatever its token.
type releasesAny struct{ *memory.Store }

func (s releasesAny) Delete(ctx context.Context, key, token string) error {
	if old, err := s.Get(ctx, key); err == nil && old.Status == persistence.StatusInProgress {
		token = old.Token
	}
	return s.Store.Delete(ctx, key, token)
}
