package idempotency

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

type ctxKey struct{}

// A settling write keeps the call's values, not its cancellation, and
// ends between the timeout and nine eighths of it after it starts. Writes
// share a deadline while it is far enough.
func TestWriteContext(t *testing.T) {
	d := &writeDeadlines{timeout: 80 * time.Millisecond}
	parent, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "v"))
	start := time.Now()
	ctx, release := d.context(parent, start)
	defer release()
	cancel()

	if got := ctx.Value(ctxKey{}); got != "v" {
		t.Errorf("Value = %v, want the parent's", got)
	}
	if ctx.Err() != nil {
		t.Fatalf("the parent's cancellation ended the write: %v", ctx.Err())
	}
	deadline, ok := ctx.Deadline()
	if want := start.Add(90 * time.Millisecond); !ok || !deadline.Equal(want) {
		t.Errorf("Deadline = %v, %v; want %v", deadline, ok, want)
	}

	// A write that starts within an eighth of the timeout shares the
	// deadline: the same Done channel, no second timer.
	shared, _ := d.context(parent, start.Add(10*time.Millisecond))
	if shared.Done() != ctx.Done() {
		t.Error("a write within an eighth of the timeout got a deadline of its own")
	}
	// Past that, a write gets a later one.
	later, _ := d.context(parent, start.Add(11*time.Millisecond))
	if later.Done() == ctx.Done() {
		t.Fatal("a write got a deadline less than the timeout away")
	}
	if got, _ := later.Deadline(); got.Before(start.Add(91 * time.Millisecond)) {
		t.Errorf("Deadline = %v, want at least the timeout after the write's start", got)
	}
	// An earlier start (another write's clock read before) does not take
	// the deadline back.
	if again, _ := d.context(parent, start); again.Done() != later.Done() {
		t.Error("a write that needs an earlier deadline replaced the later one")
	}

	<-ctx.Done()
	if ctx.Err() != context.DeadlineExceeded || context.Cause(ctx) != context.DeadlineExceeded {
		t.Errorf("after the deadline: Err = %v, Cause = %v; want context.DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
}

// Writes that start at once, on clocks read in any order, each get a
// deadline at least the timeout away, and the shared one only moves
// later.
func TestWriteContextConcurrent(t *testing.T) {
	d := &writeDeadlines{timeout: time.Minute}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			now := start.Add(time.Duration(i%16) * time.Second)
			ctx, release := d.context(t.Context(), now)
			defer release()
			if deadline, _ := ctx.Deadline(); deadline.Before(now.Add(time.Minute)) {
				t.Errorf("a write at %v got a deadline %v after it", now.Sub(start), deadline.Sub(now))
			}
		})
	}
	wg.Wait()
	if got := d.current.Load().at; got.Before(start.Add(15*time.Second + time.Minute)) {
		t.Errorf("the shared deadline went back to %v", got.Sub(start))
	}
}

// doneRecorder is a store that keeps the Done channel of each Update's
// context.
type doneRecorder struct {
	*memory.Store
	mu   sync.Mutex
	done []<-chan struct{}
}

func (s *doneRecorder) Update(ctx context.Context, rec *persistence.Record) error {
	s.mu.Lock()
	s.done = append(s.done, ctx.Done())
	s.mu.Unlock()
	return s.Store.Update(ctx, rec)
}

// The completions of a Guard's calls share a deadline, which is at least
// the final write timeout away, and not the call's own: a canceled call
// still completes.
func TestCompletionsShareADeadline(t *testing.T) {
	store := &doneRecorder{Store: memory.New()}
	g, err := NewGuard(store, WithKeyPrefix("shared"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k1", "k2"} {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		_, err := g.Do(ctx, key, "", func(context.Context) ([]byte, error) {
			cancel() // the caller gives up before the completion
			return []byte(`1`), nil
		})
		if err != nil {
			t.Fatalf("Do(%s): %v", key, err)
		}
		if deadline := g.writeDeadlines.current.Load().at; deadline.Before(start.Add(DefaultFinalWriteTimeout)) {
			t.Errorf("the completion's deadline is %v after the call's start, want at least %v", deadline.Sub(start), DefaultFinalWriteTimeout)
		}
		res, err := g.Do(t.Context(), key, "", func(context.Context) ([]byte, error) {
			t.Errorf("%s ran again: its completion was lost", key)
			return nil, nil
		})
		if err != nil || res.Outcome != OutcomeReplay {
			t.Errorf("Do(%s) again: %v, %v; want a replay", key, res.Outcome, err)
		}
	}
	if len(store.done) != 2 || store.done[0] == nil || store.done[0] != store.done[1] {
		t.Errorf("the two completions' Done channels: %v; want one shared channel", store.done)
	}
}

// Contexts derived from a write's (the store's client derives some) end
// with it, without a goroutine each to watch it.
func TestWriteContextDerived(t *testing.T) {
	d := &writeDeadlines{timeout: 20 * time.Millisecond}
	ctx, release := d.context(t.Context(), time.Now())
	defer release()
	before := goroutinesCreated()
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	// A client derives its request's contexts through contexts of its
	// own values: the SDK's middleware, then net/http's transport.
	throughValues, cancelThrough := context.WithCancelCause(context.WithValue(context.WithValue(ctx, ctxKey{}, 1), ctxKey{}, 2))
	defer cancelThrough(nil)
	if n := goroutinesCreated() - before; n > 0 {
		t.Errorf("deriving two contexts started %d goroutines", n)
	}
	<-derived.Done()
	<-throughValues.Done()
	for _, c := range []context.Context{derived, throughValues} {
		if c.Err() != context.DeadlineExceeded || context.Cause(c) != context.DeadlineExceeded {
			t.Errorf("derived context: Err = %v, Cause = %v; want context.DeadlineExceeded", c.Err(), context.Cause(c))
		}
	}
}

// A write's context hides the call's cancellation from context.Cause, as
// from Err, and from the contexts derived from it.
func TestWriteContextHidesTheCallsCause(t *testing.T) {
	d := &writeDeadlines{timeout: time.Minute}
	parent, cancel := context.WithCancelCause(t.Context())
	ctx, release := d.context(parent, time.Now())
	defer release()
	derived, cancelDerived := context.WithCancel(context.WithValue(ctx, ctxKey{}, "v"))
	defer cancelDerived()
	cancel(io.ErrUnexpectedEOF)
	for _, c := range []context.Context{ctx, derived} {
		if c.Err() != nil || context.Cause(c) != nil {
			t.Errorf("after the call's cancellation: Err = %v, Cause = %v; want nil", c.Err(), context.Cause(c))
		}
	}
}

// A Guard may serve the tests of several synctest bubbles, and of none:
// in a bubble each write has a deadline of its own, on the bubble's
// clock, since a context made in one bubble must not be used in another
// (the runtime stops the program).
func TestWriteContextInBubbles(t *testing.T) {
	d := &writeDeadlines{timeout: 5 * time.Second}
	outside, release := d.context(t.Context(), time.Now())
	defer release()
	// Its channel, made here: a bubble must not be the first to ask.
	outsideDone := outside.Done()
	for range 2 {
		synctest.Test(t, func(t *testing.T) {
			ctx, release := d.context(t.Context(), time.Now())
			defer release()
			if ctx.Done() == outsideDone {
				t.Fatal("a write in a bubble shares a deadline made outside")
			}
			deadline, _ := ctx.Deadline()
			if want := time.Now().Add(5 * time.Second); !deadline.Equal(want) {
				t.Errorf("Deadline = %v, want %v on the bubble's clock", deadline, want)
			}
			time.Sleep(5 * time.Second)
			synctest.Wait()
			if ctx.Err() != context.DeadlineExceeded {
				t.Errorf("Err = %v after the deadline, want context.DeadlineExceeded", ctx.Err())
			}
		})
	}
}

func goroutinesCreated() int64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0 // not counted before Go 1.26
	}
	return int64(s[0].Value.Uint64())
}

// BenchmarkFinalContext is a settling write over the network: a request
// and its reply, over loopback to another process that answers 200 µs
// later (as a store's server does), sent with the write's context, as a
// completion is. It reports the CPU time of this process per write
// (cpu-ns/op). PerWriteTimer is context.WithTimeout per write: its timer
// is earlier than any other, and wakes the thread that waits for the
// network on every write. Shared is the Guard's finalContext.
func BenchmarkFinalContext(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	server := exec.Command(os.Args[0], "-test.run=^TestEchoLater$")
	server.Env = append(os.Environ(), "ECHO_LATER_ADDR="+ln.Addr().String())
	if err := server.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = server.Process.Kill(); _ = server.Wait() }()
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	// A parent with a later deadline, as an invocation's: its timer is
	// the one the network waits with.
	parent, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	write := func(b *testing.B, ctxFor func() (context.Context, func())) {
		start := processCPU()
		for b.Loop() {
			ctx, done := ctxFor()
			deadline, _ := ctx.Deadline()
			_ = conn.SetDeadline(deadline)
			var buf [1]byte
			if _, err := conn.Write(buf[:]); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(conn, buf[:]); err != nil {
				b.Fatal(err)
			}
			done()
		}
		b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
	}
	b.Run("PerWriteTimer", func(b *testing.B) {
		write(b, func() (context.Context, func()) {
			return context.WithTimeout(context.WithoutCancel(parent), DefaultFinalWriteTimeout)
		})
	})
	b.Run("Shared", func(b *testing.B) {
		d := &writeDeadlines{timeout: DefaultFinalWriteTimeout}
		write(b, func() (context.Context, func()) {
			return d.context(parent, time.Now())
		})
	})
}

// TestEchoLater is BenchmarkFinalContext's server, in a process of its
// own: it connects to ECHO_LATER_ADDR and answers each byte with itself,
// 200 µs later.
func TestEchoLater(t *testing.T) {
	addr := os.Getenv("ECHO_LATER_ADDR")
	if addr == "" {
		t.Skip("BenchmarkFinalContext's server")
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var buf [1]byte
	for {
		if _, err := io.ReadFull(conn, buf[:]); err != nil {
			return
		}
		time.Sleep(200 * time.Microsecond)
		if _, err := conn.Write(buf[:]); err != nil {
			return
		}
	}
}

// processCPU returns the CPU time, user and system, that the process has
// used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
