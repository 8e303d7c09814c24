package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/wake"
	"github.com/retrysafe/retrysafe/persistence"
)

// Waking waiters (persistence.Notifier). After a completion or a release
// applies, the Store sends NOTIFY on a channel of the table, in a
// statement of its own: a NOTIFY in the
// completion's transaction would take the server's notification lock
// before its commit, and serialise every completion. A Store listens on
// one connection of its own, which it opens for the first watch and
// closes when nothing has been watched for wake.Linger. Keys are longer than a channel name may be, so
// the channel is the table's and the listener picks its keys from it.
//
// The payload is JSON: the key, and a completion's record when the
// payload stays under maxPayload bytes, the server's limit. Its waiters
// answer from that record without reading it. The others read it.
//
// A notification can be lost: the listening connection drops, or the
// server restarts. The listener then connects again, and wakes every
// watch once it listens, so that their waiters read the record again.
// Their polls cover the rest.

// notifySQL sends a wake-up ($2) on the table's channel ($1).
const notifySQL = `SELECT pg_notify($1, $2)`

// maxPayload is the server's limit on a payload, in bytes, not included.
const maxPayload = 8000

// A wakeUp is a notification's payload.
type wakeUp struct {
	Key    string              `json:"key"`
	Record *persistence.Record `json:"record,omitempty"`
}

// channelName returns the channel of the table t (quoted, qualified): a
// hash of it, since a channel name has at most 63 bytes.
func channelName(t string) string {
	sum := sha256.Sum256([]byte(t))
	return "retrysafe_" + hex.EncodeToString(sum[:8])
}

// dialer returns a function that opens a connection like db's, or nil
// when db is neither a *pgxpool.Pool nor a *pgx.Conn.
func dialer(db DB) func(context.Context) (*pgx.Conn, error) {
	var cfg *pgx.ConnConfig
	switch db := db.(type) {
	case *pgxpool.Pool:
		cfg = db.Config().ConnConfig
	case *pgx.Conn:
		cfg = db.Config()
	default:
		return nil
	}
	return func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg.Copy()) }
}

// notify wakes the waiters of key, in every process, with rec, a
// completed record, when it fits, or nil. A failure is dropped: the write
// it follows has applied, and the waiters' polls find it.
func (s *Store) notify(ctx context.Context, key string, rec *persistence.Record) {
	payload, err := json.Marshal(wakeUp{Key: key, Record: rec})
	if rec != nil && (err != nil || len(payload) >= maxPayload) {
		payload, err = json.Marshal(wakeUp{Key: key})
	}
	if err == nil {
		_, _ = s.db.Exec(ctx, notifySQL, s.listener.channel, string(payload))
	}
}

// parseWakeUp returns the wake-up of a notification's payload. Its
// record is nil unless it is the key's completed record.
func parseWakeUp(payload string) (w wakeUp, ok bool) {
	if json.Unmarshal([]byte(payload), &w) != nil {
		return wakeUp{}, false
	}
	if w.Record != nil && (w.Record.Key != w.Key || w.Record.Status != persistence.StatusCompleted) {
		w.Record = nil
	}
	return w, true
}

// A listener is a Store's connection that waits for the table's
// notifications.
type listener struct {
	channel string
	// dial opens the connection; nil when the Store's DB cannot tell how.
	dial func(context.Context) (*pgx.Conn, error)

	mu  sync.Mutex
	set wake.Set // by key
	// cur is the running session, nil when nothing is watched.
	cur *session
	// idle ends cur once it has had no watch for wake.Linger.
	idle *time.Timer
}

// A session is a listener's goroutine, from the first watch to the last.
type session struct {
	stop context.CancelFunc
	// ready is closed while the session listens.
	ready chan struct{}
}

// errCannotListen is Watch's error when the Store's DB is not one a
// connection can be opened like.
var errCannotListen = errors.New("cannot listen: the store's DB is neither a *pgxpool.Pool nor a *pgx.Conn")

// Watch implements persistence.Notifier. It returns once the Store's
// listening connection listens, or with ctx's error. A Store whose DB is
// neither a *pgxpool.Pool nor a *pgx.Conn cannot open one: it returns an
// error.
// A completion that CompleteTx writes in a transaction of the caller's
// wakes no waiter: they find it when they poll.
func (s *Store) Watch(ctx context.Context, key string) (woken <-chan *persistence.Record, stop func(), err error) {
	l := &s.listener
	if l.dial == nil {
		return nil, nil, s.opError("watch", key, errCannotListen)
	}
	l.mu.Lock()
	if l.idle != nil {
		l.idle.Stop()
		l.idle = nil
	}
	ch, _ := l.set.Add(key)
	if l.cur == nil {
		sctx, cancel := context.WithCancel(context.Background())
		l.cur = &session{stop: cancel, ready: make(chan struct{})}
		go l.listen(sctx, l.cur)
	}
	ready := l.cur.ready
	l.mu.Unlock()

	var once sync.Once
	stop = func() { once.Do(func() { l.unwatch(key, ch) }) }
	if err := wake.Ready(ctx, ready, stop); err != nil {
		return nil, nil, s.opError("watch", key, err)
	}
	return ch, stop, nil
}

// unwatch ends the watch of key that wakes ch, and the session when
// nothing has been watched for wake.Linger.
func (l *listener) unwatch(key string, ch chan *persistence.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set.Remove(key, ch)
	if l.set.Keys() == 0 && l.idle == nil {
		l.idle = time.AfterFunc(wake.Linger, l.endIdle)
	}
}

// endIdle ends the session if nothing is watched.
func (l *listener) endIdle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set.Keys() > 0 || l.cur == nil {
		return
	}
	l.cur.stop()
	l.cur, l.idle = nil, nil
}

// listen runs the session s until ctx ends: it connects, listens, and
// wakes the watches of each notification's key. When the connection
// fails, it pauses and connects again, and wakes every watch once it
// listens again.
func (l *listener) listen(ctx context.Context, s *session) {
	var backoff wake.Backoff
	listened := false
	for ctx.Err() == nil {
		conn, err := l.dial(ctx)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
				_ = conn.Close(context.Background())
			}
		}
		if err != nil {
			if !backoff.Pause(ctx.Done()) {
				return
			}
			continue
		}
		backoff.Reset()
		l.mu.Lock()
		close(s.ready)
		if listened {
			l.set.WakeAll() // notifications may have been lost meanwhile
		}
		l.mu.Unlock()
		listened = true
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				break
			}
			if w, ok := parseWakeUp(n.Payload); ok {
				l.mu.Lock()
				l.set.Wake(w.Key, w.Record)
				l.mu.Unlock()
			}
		}
		_ = conn.Close(context.Background())
		l.mu.Lock()
		s.ready = make(chan struct{}) // Watch waits until it listens again
		l.mu.Unlock()
	}
}
