package linearize

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/retrysafe/retrysafe/internal/protocol"
	"github.com/retrysafe/retrysafe/persistence"
)

// A History records the calls that clients make to a store, with the
// times they were made and returned, as the caller sees them. It is safe
// for concurrent use. The zero History is ready to use.
type History struct {
	mu      sync.Mutex
	start   time.Time
	ops     []porcupine.Operation
	clients int
}

// never is the return time of a call whose outcome is unknown. Such a
// call may take effect at any time after it was made, or not at all.
const never = math.MaxInt64

// Client returns a store that records the calls it passes to s in h, as
// the calls of one new client.
func (h *History) Client(s persistence.Store) persistence.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.start.IsZero() {
		h.start = time.Now()
	}
	h.clients++
	return &client{h: h, id: h.clients - 1, inner: s}
}

// Len returns the number of calls recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// operations returns the calls recorded, in the order they returned.
func (h *History) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// since returns the time since the history started, on the monotonic
// clock, as Porcupine's timestamps.
func (h *History) since() int64 { return int64(time.Since(h.start)) }

// add records a call made at call that returned err.
func (h *History) add(id int, in input, call int64, err error) {
	ret := h.since()
	out := outputOf(err)
	in.Until = time.Now().Add(skew)
	if out.Outcome == unknown {
		if in.Write == get {
			return // a read that failed tells nothing
		}
		ret, in.Until = never, time.Unix(1<<40, 0)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
}

// client is a persistence.Store that records its calls.
type client struct {
	h     *History
	id    int
	inner persistence.Store
}

func (c *client) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	in := input{Key: rec.Key, Write: protocol.Reserve, Token: rec.Token, Rec: recordOf(rec), Now: now}
	call := c.h.since()
	err := c.inner.Put(ctx, rec, now)
	c.h.add(c.id, in, call, err)
	return err
}

func (c *client) Get(ctx context.Context, key string) (*persistence.Record, error) {
	call := c.h.since()
	rec, err := c.inner.Get(ctx, key)
	if err == nil {
		c.h.addRead(c.id, key, call, rec)
	} else {
		c.h.add(c.id, input{Key: key, Write: get}, call, err)
	}
	return rec, err
}

// addRead records a Get made at call that returned rec.
func (h *History) addRead(id int, key string, call int64, rec *persistence.Record) {
	ret := h.since()
	r := recordOf(rec)
	in := input{Key: key, Write: get, Until: time.Now().Add(skew)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: output{Outcome: ok, Rec: &r}, Return: ret})
}

func (c *client) Update(ctx context.Context, rec *persistence.Record) error {
	w := protocol.Renew
	switch {
	case rec.Status == persistence.StatusCompleted && rec.ErrorType != "":
		w = protocol.RecordError
	case rec.Status == persistence.StatusCompleted:
		w = protocol.Complete
	}
	in := input{Key: rec.Key, Write: w, Token: rec.Token, Rec: recordOf(rec)}
	call := c.h.since()
	err := c.inner.Update(ctx, rec)
	c.h.add(c.id, in, call, err)
	return err
}

func (c *client) Delete(ctx context.Context, key, token string) error {
	in := input{Key: key, Write: protocol.Release, Token: token}
	call := c.h.since()
	err := c.inner.Delete(ctx, key, token)
	c.h.add(c.id, in, call, err)
	return err
}
