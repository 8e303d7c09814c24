package linearize

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
)

// A Workload is a run of calls on many keys, as the library makes them
// and as a hostile network delivers them.
type Workload struct {
	Prefix  string // of every key, so that runs share no key
	Keys    int    // keys, each driven by Clients clients at once
	Clients int
	Calls   int // calls each client makes on its key
	Workers int // keys driven at a time
	Seed    uint64
	// Faults injects faults (faultstore) in each client's calls. They
	// are failures before the store, lost replies, replies lost and
	// retried, and conflicts without their record. Some writes time out
	// and reach the store after their sender moved on.
	Faults bool
	// Disrupt, when set, is called before the clients of key k start,
	// to inject a server's faults.
	Disrupt func(k int)
}

// Stats counts what a run did.
type Stats struct {
	Calls  int
	Faults map[string]int // by kind
}

// Run drives w on the stores that open returns, one for each worker, and
// returns the history of every call. Before its clients start, each key
// gets a [script] of late and duplicated writes. Each known bug of a
// store answers one of them wrongly.
func (w Workload) Run(ctx context.Context, open func() persistence.Store) (*History, Stats) {
	h := &History{}
	var (
		mu    sync.Mutex
		stats = Stats{Faults: map[string]int{}}
		keys  = make(chan int)
		wg    sync.WaitGroup
	)
	count := func(kind string) {
		mu.Lock()
		stats.Faults[kind]++
		mu.Unlock()
	}
	for range w.Workers {
		store := open()
		wg.Go(func() {
			for k := range keys {
				key := fmt.Sprintf("%s#%d", w.Prefix, k)
				if w.Disrupt != nil {
					w.Disrupt(k)
				}
				script(ctx, h.Client(store), h.Client(store), key)
				var clients sync.WaitGroup
				for c := range w.Clients {
					r := mrand.New(mrand.NewPCG(w.Seed, uint64(k)<<8|uint64(c)))
					d := &driver{r: r, key: key, count: count}
					d.store = h.Client(d.faulty(store, w.Faults))
					clients.Go(func() {
						for range w.Calls {
							d.call(ctx)
						}
						d.applyLate(ctx)
					})
				}
				clients.Wait()
			}
		})
	}
	for k := range w.Keys {
		keys <- k
	}
	close(keys)
	wg.Wait()
	stats.Calls = h.Len()
	return h, stats
}

// script sends on key the writes that known bugs answer wrongly. A stale
// renewal catches a renewal that shortens the lease. A release after a
// takeover catches a release of another's record. A renewal and a
// release after the completion catch a store fenced on the token only.
// a and b are two clients' stores.
func script(ctx context.Context, a, b persistence.Store, key string) {
	now := time.Now().Truncate(time.Millisecond)
	ra := reservation(key, now, 40*time.Millisecond)
	_ = a.Put(ctx, ra, now)
	renewed := *ra
	renewed.InProgressExpiresAt = now.Add(80 * time.Millisecond)
	_ = a.Update(ctx, &renewed)
	_ = a.Update(ctx, ra) // late: older than the renewal
	_, _ = a.Get(ctx, key)
	// b's clock is ahead: at b's time a's lease, as renewed, has not
	// ended, and then it has.
	_ = b.Put(ctx, reservation(key, now.Add(60*time.Millisecond), time.Second), now.Add(60*time.Millisecond))
	later := now.Add(100 * time.Millisecond)
	rb := reservation(key, later, time.Second)
	_ = b.Put(ctx, rb, later)
	_ = a.Update(ctx, completion(ra, 0))
	_ = a.Delete(ctx, key, ra.Token)
	_, _ = b.Get(ctx, key)
	done := completion(rb, 0)
	_ = b.Update(ctx, done)
	_ = b.Update(ctx, rb) // late: the renewal after the completion
	_ = b.Delete(ctx, key, rb.Token)
	_ = b.Update(ctx, done)
	_, _ = a.Get(ctx, key)
}

// reservation is a new reservation of key at now with lease. Times are
// whole milliseconds, the precision stores keep (DynamoDB rounds up,
// Redis down).
func reservation(key string, now time.Time, lease time.Duration) *persistence.Record {
	return &persistence.Record{
		Key:                 key,
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(3 * time.Second).Truncate(time.Second),
		InProgressExpiresAt: now.Add(lease).Truncate(time.Millisecond),
		PayloadHash:         "payload",
		Token:               rand.Text(),
	}
}

// completion is the completion of rec, with a result, or with an error
// when kind is 1.
func completion(rec *persistence.Record, kind int) *persistence.Record {
	c := *rec
	c.Status = persistence.StatusCompleted
	c.InProgressExpiresAt = time.Time{}
	c.ExpiresAt = time.Now().Add(time.Second + time.Duration(mrand.IntN(1000))*time.Millisecond).Truncate(time.Second)
	if kind == 1 {
		c.ErrorType, c.ErrorMessage = "Declined", "declined by "+rec.Token
	} else {
		c.Response = []byte(`{"by":"` + rec.Token + `"}`)
	}
	return &c
}

// driver is one client of a key: it makes calls as the library does.
type driver struct {
	r     *mrand.Rand
	key   string
	store persistence.Store
	count func(kind string)
	held  []*faultstore.Held // writes held back, to apply late
	late  []func(ctx context.Context)
}

// faulty returns store with faults when on.
func (d *driver) faulty(store persistence.Store, on bool) persistence.Store {
	if !on {
		return store
	}
	f := faultstore.New(store)
	f.Fault = func(op faultstore.Op, _ string, _ int) faultstore.Fault {
		n := d.r.IntN(100)
		var fault faultstore.Fault
		switch {
		case n < 2:
			fault = faultstore.FailBefore
		case n < 5:
			fault = faultstore.LoseReply
		case n < 8:
			fault = faultstore.RetryAfterLostReply
		case n < 11 && op == faultstore.OpPut:
			fault = faultstore.DropExisting
		case n < 14 && op != faultstore.OpGet:
			fault = faultstore.ApplyLate
		default:
			return faultstore.None
		}
		d.count(faultNames[fault])
		return fault
	}
	f.OnHold = func(_ context.Context, h *faultstore.Held) { d.held = append(d.held, h) }
	return f
}

var faultNames = map[faultstore.Fault]string{
	faultstore.FailBefore:          "fail before the store",
	faultstore.LoseReply:           "lost reply",
	faultstore.RetryAfterLostReply: "lost reply, retried",
	faultstore.DropExisting:        "conflict without its record",
	faultstore.ApplyLate:           "write applied late",
}

// call makes one call on the key: a reservation, renewals, and a
// completion, an error recorded, a release, or nothing (a crash). Writes
// whose outcome is unknown are sent again once, as the library does.
func (d *driver) call(ctx context.Context) {
	// The caller's clock is off by up to 10ms either way.
	now := time.Now().Add(time.Duration(d.r.IntN(20)-10) * time.Millisecond).Truncate(time.Millisecond)
	rec := reservation(d.key, now, time.Duration(2+d.r.IntN(30))*time.Millisecond)
	rec.ExpiresAt = now.Add(time.Second + time.Duration(d.r.IntN(1000))*time.Millisecond).Truncate(time.Second)
	rec.Held = d.r.IntN(10) == 0
	if !d.reserve(ctx, rec, now) {
		if d.r.IntN(2) == 0 {
			_, _ = d.store.Get(ctx, d.key)
		}
		return
	}
	for range d.r.IntN(3) {
		renewed := *rec
		renewed.InProgressExpiresAt = time.Now().Add(time.Duration(2+d.r.IntN(30)) * time.Millisecond).Truncate(time.Millisecond)
		if d.r.IntN(5) == 0 {
			renewed.InProgressExpiresAt = rec.InProgressExpiresAt.Add(-time.Millisecond) // stale
		}
		if err := d.retry(func() error { return d.store.Update(ctx, &renewed) }); err != nil {
			break
		}
		d.late = append(d.late, func(ctx context.Context) { _ = d.store.Update(ctx, &renewed) })
	}
	switch n := d.r.IntN(100); {
	case n < 55:
		done := completion(rec, 0)
		_ = d.retry(func() error { return d.store.Update(ctx, done) })
	case n < 65:
		done := completion(rec, 1)
		_ = d.retry(func() error { return d.store.Update(ctx, done) })
	case n < 90:
		_ = d.retry(func() error { return d.store.Delete(ctx, d.key, rec.Token) })
		d.late = append(d.late, func(ctx context.Context) { _ = d.store.Delete(ctx, d.key, rec.Token) })
	default:
		// The caller crashed: the reservation lapses.
	}
	if d.r.IntN(4) == 0 {
		d.applyLate(ctx)
	}
}

// reserve sends rec, and reports whether the caller holds the key.
func (d *driver) reserve(ctx context.Context, rec *persistence.Record, now time.Time) bool {
	err := d.retry(func() error { return d.store.Put(ctx, rec, now) })
	var c *persistence.ConflictError
	switch {
	case err == nil:
		return true
	case errors.As(err, &c) && c.Existing != nil:
		return c.Existing.Token == rec.Token
	}
	return false
}

// retry runs send, and again once when its outcome is unknown.
func (d *driver) retry(send func() error) error {
	err := send()
	if err == nil || errors.Is(err, persistence.ErrFenced) || errors.Is(err, persistence.ErrConflict) {
		return err
	}
	return send()
}

// applyLate applies the writes held back, and sends again, late, some of
// the writes of earlier calls.
func (d *driver) applyLate(ctx context.Context) {
	for _, h := range d.held {
		_ = h.Apply(ctx)
	}
	d.held = nil
	for _, send := range d.late {
		if d.r.IntN(3) == 0 {
			send(ctx)
		}
	}
	d.late = nil
}
