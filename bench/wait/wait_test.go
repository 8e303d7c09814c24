// Package wait measures how soon a call that waits for a key
// (idempotency.WithWait) in one process gets its answer after the holder
// of the key, in another, completes: woken by the store, or polling it as
// over a store that cannot wake it. Run it with make bench-wait.
//
// Each iteration reserves a fresh key in the benchmark's process, the
// holder, whose function then works for a while (the hold). A second
// process, started from the test binary, runs three waiting callers of
// the key, as a service would. When the holder's completion has returned,
// the latency of each caller is the time from then to its answer, on the
// machine's wall clock, which both processes share. The benchmark reports
// the latencies' median and 99th percentile, and the store requests that
// the waiting process made per iteration.
package wait

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// The environment of the waiting process: the store and its address.
const (
	envStore = "WAITBENCH_STORE"
	envAddr  = "WAITBENCH_ADDR"
)

// callers is the number of waiting callers in the waiting process.
const callers = 3

func TestMain(m *testing.M) {
	if store := os.Getenv(envStore); store != "" {
		if err := waitingProcess(store, os.Getenv(envAddr), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	pgserver.Main(m)
}

// openStore returns a store of kind on addr: a redis-server's address, or
// a PostgreSQL URL.
func openStore(ctx context.Context, kind, addr string) (persistence.Store, func(), error) {
	switch kind {
	case "redis":
		client := redis.NewClient(&redis.Options{Addr: addr})
		store, err := redisstore.New(client)
		return store, func() { client.Close() }, err
	case "postgres":
		pool, err := pgxpool.New(ctx, addr)
		if err != nil {
			return nil, nil, err
		}
		store, err := postgres.New(pool, "idempotency")
		return store, pool.Close, err
	}
	return nil, nil, fmt.Errorf("unknown store %q", kind)
}

// waitingProcess runs the waiting process: for each line "KEY MODE" on
// in, it starts the callers of KEY, answers "reserved" when the key's
// first reservation attempt has returned, and then, when every caller has
// its answer, "done REQUESTS T1 T2 T3" (wall clock, Unix nanoseconds).
// MODE "poll" makes the store's watch fail, as over a store that cannot
// wake waiters.
func waitingProcess(kind, addr string, in io.Reader, out io.Writer) error {
	ctx := context.Background()
	inner, closeStore, err := openStore(ctx, kind, addr)
	if err != nil {
		return err
	}
	defer closeStore()
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		key, mode, _ := strings.Cut(lines.Text(), " ")
		store := faultstore.New(inner)
		reserved := make(chan struct{}, 1)
		store.Fault = func(op faultstore.Op, _ string, n int) faultstore.Fault {
			if op == faultstore.OpWatch && mode == "poll" {
				return faultstore.FailBefore
			}
			return faultstore.None
		}
		first := &signalling{Store: store, reserved: reserved}
		h, err := idempotency.Wrap(func(context.Context, string) (string, error) { return "the waiter's", nil },
			first, idempotency.WithKeyPrefix("waitbench"), idempotency.WithWait(time.Minute))
		if err != nil {
			return err
		}
		var (
			wg    sync.WaitGroup
			times [callers]int64
			errs  [callers]error
		)
		for i := range callers {
			wg.Go(func() {
				var got string
				got, errs[i] = h(ctx, key)
				times[i] = time.Now().UnixNano()
				if errs[i] == nil && got != "the holder's" {
					errs[i] = fmt.Errorf("caller %d got %q", i, got)
				}
			})
		}
		<-reserved
		fmt.Fprintln(out, "reserved")
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		requests := store.Calls(faultstore.OpPut) + store.Calls(faultstore.OpGet)
		fmt.Fprintln(out, "done", requests, times[0], times[1], times[2])
	}
	return lines.Err()
}

// signalling is the waiting process's store: it sends on reserved when
// the first Put has returned.
type signalling struct {
	*faultstore.Store
	reserved chan struct{}
}

func (s *signalling) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	err := s.Store.Put(ctx, rec, now)
	if s.Calls(faultstore.OpPut) == 1 {
		s.reserved <- struct{}{}
	}
	return err
}

// completing is the holder's store: it records when each completion
// returned.
type completing struct {
	persistence.Store
	completed chan int64
}

func (c completing) Update(ctx context.Context, rec *persistence.Record) error {
	err := c.Store.Update(ctx, rec)
	if rec.Status == persistence.StatusCompleted {
		c.completed <- time.Now().UnixNano()
	}
	return err
}

func BenchmarkWaiterLatency(b *testing.B) {
	stores := []struct {
		kind  string
		start func(b *testing.B) string
	}{
		{"redis", func(b *testing.B) string { return redisserver.Start(b).Addr }},
		{"postgres", func(b *testing.B) string {
			url := pgserver.Shared(b).NewDatabase(b)
			pool, err := pgxpool.New(b.Context(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			if err := postgres.CreateTable(b.Context(), pool, "idempotency"); err != nil {
				b.Fatal(err)
			}
			return url
		}},
	}
	for _, s := range stores {
		b.Run(s.kind, func(b *testing.B) {
			addr := s.start(b)
			for _, hold := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second} {
				for _, mode := range []string{"poll", "wake"} {
					b.Run(fmt.Sprintf("hold=%v/%s", hold, mode), func(b *testing.B) {
						measure(b, s.kind, addr, hold, mode)
					})
				}
			}
		})
	}
}

// measure runs b.N iterations of a hold of hold, with the waiting process
// in mode.
func measure(b *testing.B, kind, addr string, hold time.Duration, mode string) {
	ctx := b.Context()
	inner, closeStore, err := openStore(ctx, kind, addr)
	if err != nil {
		b.Fatal(err)
	}
	defer closeStore()
	store := completing{Store: inner, completed: make(chan int64, 1)}
	entered, work := make(chan struct{}), make(chan struct{})
	h, err := idempotency.Wrap(func(context.Context, string) (string, error) {
		entered <- struct{}{}
		<-work
		return "the holder's", nil
	}, store, idempotency.WithKeyPrefix("waitbench"))
	if err != nil {
		b.Fatal(err)
	}

	waiting := exec.Command(os.Args[0], "-test.run=^$")
	waiting.Env = append(os.Environ(), envStore+"="+kind, envAddr+"="+addr)
	waiting.Stderr = os.Stderr
	toWaiting, err := waiting.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	fromWaiting, err := waiting.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := waiting.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		toWaiting.Close()
		_ = waiting.Wait()
	}()
	replies := bufio.NewScanner(fromWaiting)
	reply := func() []string {
		if !replies.Scan() {
			b.Fatalf("the waiting process ended: %v", replies.Err())
		}
		return strings.Fields(replies.Text())
	}

	var latencies []time.Duration
	requests := 0
	for b.Loop() {
		key := rand.Text()
		done := make(chan error, 1)
		go func() {
			got, err := h(ctx, key)
			if err == nil && got != "the holder's" {
				err = fmt.Errorf("the holder got %q", got)
			}
			done <- err
		}()
		<-entered // the holder holds the key before the waiters ask for it
		fmt.Fprintln(toWaiting, key, mode)
		if r := reply(); len(r) != 1 || r[0] != "reserved" {
			b.Fatalf("the waiting process answered %q", r)
		}
		time.Sleep(hold)
		work <- struct{}{}
		completed := <-store.completed
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		r := reply()
		if len(r) != 2+callers || r[0] != "done" {
			b.Fatalf("the waiting process answered %q", r)
		}
		n, _ := strconv.Atoi(r[1])
		requests += n
		for _, field := range r[2:] {
			t, _ := strconv.ParseInt(field, 10, 64)
			latencies = append(latencies, time.Duration(t-completed))
		}
	}
	slices.Sort(latencies)
	b.ReportMetric(ms(percentile(latencies, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(latencies, 0.99)), "p99-ms")
	b.ReportMetric(float64(requests)/float64(b.N), "requests/waiting-process")
}

// percentile returns the p-th percentile of the sorted ds (nearest rank).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(p*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
