// Package relay is what the tests' fault-injecting proxies share: a
// listener on 127.0.0.1 that dials an upstream for each connection it
// accepts, hands both connections to the proxy, and closes every
// connection when it closes.
package relay

import (
	"net"
	"sync"
	"sync/atomic"
)

// A Relay accepts connections and relays each to its upstream.
type Relay struct {
	// Addr is the relay's address, "127.0.0.1:<port>".
	Addr string

	upstream string
	serve    func(client, server net.Conn)
	ln       net.Listener
	conns    atomic.Int64

	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free port of 127.0.0.1. For each connection it
// accepts, it dials upstream and calls serve with both connections, in a
// goroutine of its own; both are closed when serve returns. The caller
// must Close the relay.
func Start(upstream string, serve func(client, server net.Conn)) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{Addr: ln.Addr().String(), upstream: upstream, serve: serve, ln: ln, open: map[net.Conn]struct{}{}}
	r.wg.Go(r.accept)
	return r, nil
}

// Connections counts the connections the relay accepted.
func (r *Relay) Connections() int64 { return r.conns.Load() }

// Close stops the relay, closes its connections and waits for their
// serve calls to return. It may be called more than once.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	err := r.ln.Close()
	for c := range r.open {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// track adds c to the open connections, or closes it and reports false
// when the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.open[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.open, c)
	r.mu.Unlock()
	c.Close()
}

func (r *Relay) accept() {
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.conns.Add(1)
		if !r.track(client) {
			return
		}
		r.wg.Go(func() { r.relay(client) })
	}
}

func (r *Relay) relay(client net.Conn) {
	defer r.untrack(client)
	server, err := net.Dial("tcp", r.upstream)
	if err != nil {
		return
	}
	if !r.track(server) {
		return
	}
	defer r.untrack(server)
	r.serve(client, server)
}
