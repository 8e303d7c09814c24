package redis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waking waiters (persistence.Notifier). The scripts that complete or
// release a record publish on a channel named after its Redis key, in the
// same run, so a completion costs no extra round trip. A Store subscribes
// to the channels its waiters watch on one connection, which it opens for
// the first watch and closes after the last.
//
// Plain PUBLISH and SUBSCRIBE work on one node, with Sentinel, with
// Valkey and with Redis 6, and on a cluster, which forwards messages to
// every node. Keyspace notifications would need a server setting, and
// client-side tracking reports changes to keys a connection has read,
// renewals included, not completions. Sharded channels (SPUBLISH, Redis 7)
// would keep a cluster's messages on one shard, but not run on Redis 6.
//
// A message can be lost: the connection drops, or the server fails over.
// go-redis then reconnects and subscribes again, and each confirmation of
// a channel already confirmed wakes its waiters, who read the record
// again. Their polls cover the rest.

// watches are a Store's subscriptions. The zero value, with client set,
// is ready to use.
type watches struct {
	client redis.UniversalClient

	mu sync.Mutex
	// ps is the subscription connection, nil when nothing is watched;
	// quit is closed when it is closed.
	ps   *redis.PubSub
	quit chan struct{}
	// channels are the watched channels, by name.
	channels map[string]*channel
}

// A channel is one watched channel of a watches.
type channel struct {
	// subscribed is closed when the server first confirms the subscription.
	subscribed chan struct{}
	confirmed  bool
	woken      map[chan struct{}]struct{}
}

// Watch implements persistence.Notifier. It returns once the server has
// confirmed the subscription to key's channel (at once when a call in the
// process watches key already), or with ctx's error.
func (s *Store) Watch(ctx context.Context, key string) (woken <-chan struct{}, stop func(), err error) {
	w := &s.watches
	name := s.RedisKey(key)
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.ps == nil {
		// The connection outlives the call that opens it.
		w.ps = w.client.Subscribe(context.WithoutCancel(ctx))
		w.quit = make(chan struct{})
		go w.receive(w.ps, w.quit)
	}
	if w.channels == nil {
		w.channels = make(map[string]*channel)
	}
	c, watched := w.channels[name]
	if !watched {
		c = &channel{subscribed: make(chan struct{}), woken: make(map[chan struct{}]struct{})}
		w.channels[name] = c
	}
	c.woken[ch] = struct{}{}
	ps := w.ps
	w.mu.Unlock()

	var once sync.Once
	stop = func() { once.Do(func() { w.stop(name, ch) }) }
	if !watched {
		if err := ps.Subscribe(ctx, name); err != nil {
			stop()
			return nil, nil, s.opError("watch", key, err)
		}
	}
	select {
	case <-c.subscribed:
		return ch, stop, nil
	case <-ctx.Done():
		stop()
		return nil, nil, s.opError("watch", key, ctx.Err())
	}
}

// stop ends the watch of channel name that wakes ch: it unsubscribes when
// it is the channel's last, and closes the connection when it is the last
// of all.
func (w *watches) stop(name string, ch chan struct{}) {
	w.mu.Lock()
	c := w.channels[name]
	delete(c.woken, ch)
	if len(c.woken) > 0 {
		w.mu.Unlock()
		return
	}
	delete(w.channels, name)
	ps, last := w.ps, len(w.channels) == 0
	if last {
		w.ps = nil
		close(w.quit)
	}
	w.mu.Unlock()
	if last {
		_ = ps.Close()
		return
	}
	// A failed unsubscription leaves a channel whose messages are dropped.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = ps.Unsubscribe(ctx, name)
}

// receive reads ps until quit is closed: confirmations and messages, which
// wake the channels' waiters. After an error it waits before it reads
// again, from 10 milliseconds to a second, since go-redis reconnects on
// the next read and would otherwise spin while the server is down.
func (w *watches) receive(ps *redis.PubSub, quit chan struct{}) {
	const backoffFirst, backoffMax = 10 * time.Millisecond, time.Second
	backoff := backoffFirst
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			select {
			case <-quit:
				return
			default:
			}
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			t := time.NewTimer(backoff)
			select {
			case <-quit:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, backoffMax)
			continue
		}
		backoff = backoffFirst
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				w.confirm(m.Channel)
			}
		case *redis.Message:
			w.wake(m.Channel)
		}
	}
}

// confirm records the server's confirmation of channel name: the first
// ends the watches' wait in Watch, and any later one (a subscription
// again after a reconnection) wakes their waiters, since a message may
// have been lost meanwhile.
func (w *watches) confirm(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.channels[name]
	switch {
	case c == nil:
	case !c.confirmed:
		c.confirmed = true
		close(c.subscribed)
	default:
		c.wakeLocked()
	}
}

// wake wakes the waiters of channel name.
func (w *watches) wake(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.channels[name]; c != nil {
		c.wakeLocked()
	}
}

// wakeLocked wakes c's waiters, without blocking: a pending wake-up stands
// for any number. The caller holds the watches' lock.
func (c *channel) wakeLocked() {
	for ch := range c.woken {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
