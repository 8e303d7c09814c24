package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrysafe/retrysafe/internal/wake"
	"github.com/retrysafe/retrysafe/persistence"
)

// Waking waiters (persistence.Notifier). The scripts that complete or
// release a record publish on a channel named after its Redis key, in the
// same run, so a completion costs no extra round trip. A Store subscribes
// to the channels its waiters watch on one connection, which it opens for
// the first watch and closes when nothing has been watched for
// wake.Linger.
//
// Plain PUBLISH and SUBSCRIBE work on one node, with Sentinel, with
// Valkey and with Redis 6, and on a cluster, which forwards messages to
// every node. Keyspace notifications would need a server setting, and
// client-side tracking reports changes to keys a connection has read,
// renewals included, not completions. Sharded channels (SPUBLISH, Redis 7)
// would keep a cluster's messages on one shard, but not run on Redis 6.
//
// A completion's message carries the completed record, so that its
// waiters answer without reading it. A release's carries nothing, and
// its waiters read the record. So does a record longer than maxMessage:
// every subscribed connection gets a copy, on a cluster through every
// node, and Redis closes a subscriber whose output buffer grows too large.
//
// A message can be lost: the connection drops, or the server fails over.
// go-redis then reconnects and subscribes again, and each confirmation of
// a channel already confirmed wakes its waiters, who read the record
// again. Their polls cover the rest.

// maxMessage is the longest record, in bytes of its fields and values,
// that a completion's message carries.
const maxMessage = 64 << 10

// watches are a Store's subscriptions. The zero value, with client set,
// is ready to use.
type watches struct {
	client redis.UniversalClient

	mu  sync.Mutex
	set wake.Set // by channel name
	// ps is the subscription connection, nil when nothing is watched;
	// quit is closed when it is closed.
	ps   *redis.PubSub
	quit chan struct{}
	// subscribed are the watched channels' first confirmations, closed
	// when the server has confirmed the subscription, by channel name.
	subscribed map[string]chan struct{}
	// idle closes ps once it has had no watch for wake.Linger.
	idle *time.Timer
}

// Watch implements persistence.Notifier. It returns once the server has
// confirmed the subscription to key's channel, or with ctx's error. When
// a call in the process watches key already, it returns at once.
func (s *Store) Watch(ctx context.Context, key string) (woken <-chan *persistence.Record, stop func(), err error) {
	w := &s.watches
	name := s.RedisKey(key)
	w.mu.Lock()
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	if w.ps == nil {
		// The connection outlives the call that opens it.
		w.ps = w.client.Subscribe(context.WithoutCancel(ctx))
		w.quit = make(chan struct{})
		w.subscribed = make(map[string]chan struct{})
		go w.receive(w.ps, w.quit, s.message)
	}
	ch, first := w.set.Add(name)
	if first {
		w.subscribed[name] = make(chan struct{})
	}
	ps, subscribed := w.ps, w.subscribed[name]
	w.mu.Unlock()

	var once sync.Once
	stop = func() { once.Do(func() { w.stop(name, ch) }) }
	if first {
		if err := ps.Subscribe(ctx, name); err != nil {
			stop()
			return nil, nil, s.opError("watch", key, err)
		}
	}
	if err := wake.Ready(ctx, subscribed, stop); err != nil {
		return nil, nil, s.opError("watch", key, err)
	}
	return ch, stop, nil
}

// stop ends the watch of channel name that wakes ch: it unsubscribes when
// it is the channel's last, and closes the connection after wake.Linger
// when it is the last of all.
func (w *watches) stop(name string, ch chan *persistence.Record) {
	w.mu.Lock()
	if !w.set.Remove(name, ch) {
		w.mu.Unlock()
		return
	}
	delete(w.subscribed, name)
	ps := w.ps
	if w.set.Keys() == 0 && w.idle == nil {
		w.idle = time.AfterFunc(wake.Linger, w.closeIdle)
	}
	w.mu.Unlock()
	// A failed unsubscription leaves a channel whose messages are dropped.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = ps.Unsubscribe(ctx, name)
}

// closeIdle closes the connection if nothing is watched.
func (w *watches) closeIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set.Keys() > 0 || w.ps == nil {
		return
	}
	close(w.quit)
	_ = w.ps.Close()
	w.ps, w.idle = nil, nil
}

// receive reads ps until quit is closed: confirmations and messages, which
// wake the channels' waiters with the record that message returns. After
// an error it pauses before it reads again, since go-redis reconnects on
// the next read and would otherwise spin while the server is down.
func (w *watches) receive(ps *redis.PubSub, quit chan struct{}, message func(name, payload string) *persistence.Record) {
	var backoff wake.Backoff
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) || !backoff.Pause(quit) {
				return
			}
			continue
		}
		backoff.Reset()
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				w.confirm(m.Channel)
			}
		case *redis.Message:
			rec := message(m.Channel, m.Payload)
			w.mu.Lock()
			w.set.Wake(m.Channel, rec)
			w.mu.Unlock()
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
	subscribed, ok := w.subscribed[name]
	if !ok {
		return
	}
	select {
	case <-subscribed:
		w.set.Wake(name, nil)
	default:
		close(subscribed)
	}
}

// message returns the completed record that a message on channel name
// carries (see updateScript), or nil when it carries none.
func (s *Store) message(name, payload string) *persistence.Record {
	key, ok := strings.CutPrefix(name, s.prefix)
	var reply []any
	for ok && payload != "" {
		var n string
		n, payload, ok = strings.Cut(payload, ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size > len(payload) {
			return nil
		}
		reply = append(reply, payload[:size])
		payload = payload[size:]
	}
	if !ok || len(reply) == 0 {
		return nil
	}
	rec, err := s.fields.decode(key, reply)
	if err != nil || rec.Status != persistence.StatusCompleted {
		return nil
	}
	return rec
}
