package postgres_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/cpubench"
	"github.com/retrysafe/retrysafe/internal/testing/paytest"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// BenchmarkStore measures the store's round trips against a local
// PostgreSQL, on one connection: FirstCall is what a first invocation costs
// the store (Put of a new key, then Update to complete it: two
// statements), Replay what a retry of a completed invocation costs (a Put
// that conflicts and returns the record: one statement), Get one read.
// Besides ns/op it reports statements/op.
//
//	go test -run '^$' -bench Store -count 6 ./ | benchstat -
func BenchmarkStore(b *testing.B) {
	c := &counter{}
	pool := newPool(b, newDatabase(b), counted(c), func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	ctx := b.Context()
	if err := postgres.CreateTable(ctx, pool, "idempotency"); err != nil {
		b.Fatal(err)
	}
	store := newStore(b, pool)
	now := testNow()
	response := `{"statusCode":201,"body":"{\"id\":\"p_1\"}","headers":{"Content-Type":"application/json"}}`
	done := recordtest.InProgress(newKey(), now)
	if err := store.Put(ctx, done, now); err != nil {
		b.Fatal(err)
	}
	if err := store.Update(ctx, completed(done, response)); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, op func()) {
		b.ReportAllocs()
		start := c.queries.Load()
		for b.Loop() {
			op()
		}
		b.ReportMetric(float64(c.queries.Load()-start)/float64(b.N), "statements/op")
	}
	b.Run("FirstCall", func(b *testing.B) {
		run(b, func() {
			rec := recordtest.InProgress(newKey(), now)
			if err := store.Put(ctx, rec, now); err != nil {
				b.Fatal(err)
			}
			if err := store.Update(ctx, completed(rec, response)); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Replay", func(b *testing.B) {
		probe := recordtest.InProgress(done.Key, now)
		run(b, func() {
			var conflict *persistence.ConflictError
			if err := store.Put(ctx, probe, now); !errors.As(err, &conflict) || conflict.Existing == nil {
				b.Fatalf("Put over a completed record: %v", err)
			}
		})
	})
	b.Run("Get", func(b *testing.B) {
		run(b, func() {
			if _, err := store.Get(ctx, done.Key); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkFloor measures a wrapped handler's first call and replay next
// to the bare statements they need, made directly with pgx on the same
// pool of one connection to the same server: the floor. Besides ns/op
// (wall) it reports the CPU time of this process per operation
// (cpu-ns/op: the client's) and of the server's backend process
// (server-cpu-ns/op, from /proc, in clock ticks of 10 ms summed over the
// run), and the statements per operation. FirstCallRatio and ReplayRatio
// run the two alternately and report the library's CPU time over the
// floor's, in this process (cpu-ratio; the server's clock ticks are too
// coarse to tell one operation's):
//
//	go test -run '^$' -bench Floor -cpu 1 -count 6 ./ | benchstat -
//
// BareFirstCall is an INSERT of the reservation's columns with ON
// CONFLICT DO NOTHING and an UPDATE of the status, the expiry and the
// response fenced on the owner token and the in-progress status (the
// least a completion needs, docs/protocol.md). BareReplay is one
// statement that tries the same INSERT and, when it conflicts, reads the
// record: without the takeover condition and without the locking read.
// StoreFirstCall and StoreReplay are the store's own statements without
// the library around them.
func BenchmarkFloor(b *testing.B) {
	c := &counter{}
	pool := newPool(b, newDatabase(b), counted(c), func(cfg *pgxpool.Config) { cfg.MaxConns, cfg.MinConns = 1, 1 })
	ctx := b.Context()
	if err := postgres.CreateTable(ctx, pool, "idempotency"); err != nil {
		b.Fatal(err)
	}
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	store := newStore(b, pool)
	h := &paytest.Handler{}
	var doneKey string
	pay := paytest.Wrap(b, func(ctx context.Context, p paytest.Payment) (paytest.Charge, error) {
		if doneKey == "" {
			doneKey, _ = idempotency.KeyFromContext(ctx)
		}
		return h.Charge(ctx, p)
	}, store)
	done := paytest.New()
	first, err := pay(ctx, done)
	if err != nil {
		b.Fatal(err)
	}
	response := []byte(`{"charge_id":"` + first.ChargeID + `","amount":4200}`)

	var (
		key, token string
		p          paytest.Payment
	)
	newKey := func() { p = paytest.New(); key, token = "payments#"+p.OrderID, p.OrderID[4:] }
	bareFirstCall := func() {
		now := time.Now()
		if _, err := pool.Exec(ctx, bareInsert, key, now.Add(time.Hour).Unix(), now.Add(30*time.Second).UnixMilli(), token); err != nil {
			b.Fatal(err)
		}
		tag, err := pool.Exec(ctx, bareUpdate, key, now.Add(time.Hour).Unix(), response, token)
		if err != nil || tag.RowsAffected() != 1 {
			b.Fatal(tag, err)
		}
	}
	libFirstCall := func() {
		if _, err := pay(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	storeFirstCall := func() {
		now := time.Now()
		rec := recordtest.InProgress(key, now)
		if err := store.Put(ctx, rec, now); err != nil {
			b.Fatal(err)
		}
		if err := store.Update(ctx, completed(rec, string(response))); err != nil {
			b.Fatal(err)
		}
	}
	bareReplay := func() {
		now := time.Now()
		var (
			status string
			data   []byte
		)
		err := pool.QueryRow(ctx, bareReplaySQL, doneKey, now.Add(time.Hour).Unix(), now.Add(30*time.Second).UnixMilli(), "t2").Scan(&status, &data)
		if err != nil || status != "COMPLETED" {
			b.Fatal(status, err)
		}
	}
	libReplay := func() {
		if _, err := pay(ctx, done); err != nil {
			b.Fatal(err)
		}
	}
	storeReplay := func() {
		now := time.Now()
		var conflict *persistence.ConflictError
		if err := store.Put(ctx, recordtest.InProgress(doneKey, now), now); !errors.As(err, &conflict) {
			b.Fatal(err)
		}
	}
	// Warm the connection, its statement cache and the server's caches,
	// so that the first sub-benchmark is not the one that pays for them.
	for range 200 {
		newKey()
		bareFirstCall()
		newKey()
		libFirstCall()
		newKey()
		storeFirstCall()
		bareReplay()
		libReplay()
		storeReplay()
	}

	floor := func(op, prepare func()) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			q := c.queries.Load()
			server := serverCPU(backend)
			cpu, n := cpubench.Loop(b, op, prepare)
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
			b.ReportMetric(float64((serverCPU(backend)-server).Nanoseconds())/float64(n), "server-cpu-ns/op")
			b.ReportMetric(float64(c.queries.Load()-q)/float64(n), "statements/op")
		}
	}
	b.Run("BareFirstCall", floor(bareFirstCall, newKey))
	b.Run("StoreFirstCall", floor(storeFirstCall, newKey))
	b.Run("LibFirstCall", floor(libFirstCall, newKey))
	b.Run("BareReplay", floor(bareReplay, nil))
	b.Run("StoreReplay", floor(storeReplay, nil))
	b.Run("LibReplay", floor(libReplay, nil))
	// The ratios, from the two alternating in one loop, so that a change
	// in the machine's load during the run weighs on both alike.
	ratio := func(bare, lib, prepare func()) func(b *testing.B) {
		return func(b *testing.B) {
			var cpu [2]time.Duration
			for b.Loop() {
				for i, op := range [2]func(){bare, lib} {
					if prepare != nil {
						prepare()
					}
					start := cpubench.ProcessCPU()
					op()
					cpu[i] += cpubench.ProcessCPU() - start
				}
			}
			if cpu[0] > 0 {
				b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio")
			}
		}
	}
	b.Run("FirstCallRatio", ratio(bareFirstCall, libFirstCall, newKey))
	b.Run("ReplayRatio", ratio(bareReplay, libReplay, nil))
}

// The floor's bare statements.
const (
	bareInsert = `INSERT INTO idempotency (id, status, expiration, in_progress_expiration, owner_token)
VALUES ($1, 'INPROGRESS', $2, $3, $4) ON CONFLICT (id) DO NOTHING`
	bareUpdate = `UPDATE idempotency SET status = 'COMPLETED', expiration = $2, data = $3, in_progress_expiration = NULL
WHERE id = $1 AND owner_token = $4 AND status = 'INPROGRESS'`
	bareReplaySQL = `WITH ins AS (
	INSERT INTO idempotency (id, status, expiration, in_progress_expiration, owner_token)
	VALUES ($1, 'INPROGRESS', $2, $3, $4) ON CONFLICT (id) DO NOTHING RETURNING true
)
SELECT status, data FROM idempotency WHERE id = $1 AND NOT EXISTS (SELECT FROM ins)`
)

// serverCPU returns the CPU time, user and system, of process pid (the
// server's backend), from /proc/<pid>/stat, in clock ticks of 10 ms
// (USER_HZ); 0 where there is no /proc.
func serverCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses: utime
	// and stime are the 14th and 15th fields of the line.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
