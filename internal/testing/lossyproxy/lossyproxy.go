// Package lossyproxy is a TCP proxy for tests that loses what a flaky
// network loses between an HTTP client and a server on 127.0.0.1: a
// request, before the server sees it, or the server's reply, after the
// server has processed the request. The client sees the same in both
// cases, a connection that breaks before any answer, and only an
// idempotency key tells a safe retry from a second side effect.
//
// The proxy knows HTTP/1.1 only as far as this: on each connection, bytes
// from the client after the server has started answering begin a new
// request, as clients that do not pipeline send them (net/http does not).
// It decides the fate of each request, numbered from 1 across
// connections, when the request's first bytes arrive.
package lossyproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/retrysafe/retrysafe/internal/testing/relay"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// Fault is what the proxy does to one request.
type Fault int

const (
	// Pass forwards the request and its reply.
	Pass Fault = iota
	// LoseRequest closes the client's connection when the request
	// arrives, before it reaches the server: the server never sees it.
	LoseRequest
	// LoseReply forwards the request, and closes both connections when
	// the server's reply begins: the server has processed the request,
	// and the client never gets its answer.
	LoseReply
)

// Stats counts what the proxy did.
type Stats struct {
	// Connections counts the connections the proxy accepted.
	Connections int64
	// Requests counts the requests it saw begin.
	Requests int64
	// LostRequests and LostReplies count the faults it injected.
	LostRequests, LostReplies int64
}

// Proxy is a running proxy.
type Proxy struct {
	// Addr is the proxy's address, "127.0.0.1:<port>".
	Addr string
	// URL is "http://" + Addr.
	URL string

	decide func(n int) Fault
	relay  *relay.Relay

	requests, lostRequests, lostReplies atomic.Int64
}

// Start starts a proxy to the TCP address upstream ("127.0.0.1:8080") for
// the test tb, and closes it when tb ends. decide chooses the fate of
// request n (from 1); it is called concurrently, and nil passes every
// request.
func Start(tb testenv.TB, upstream string, decide func(n int) Fault) *Proxy {
	tb.Helper()
	p, err := New(upstream, decide)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// New starts a proxy to upstream on a free port of 127.0.0.1; the caller
// must Close it.
func New(upstream string, decide func(n int) Fault) (*Proxy, error) {
	if decide == nil {
		decide = func(int) Fault { return Pass }
	}
	p := &Proxy{decide: decide}
	r, err := relay.Start(upstream, p.serve)
	if err != nil {
		return nil, err
	}
	p.relay, p.Addr, p.URL = r, r.Addr, "http://"+r.Addr
	return p, nil
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{
		Connections:  p.relay.Connections(),
		Requests:     p.requests.Load(),
		LostRequests: p.lostRequests.Load(),
		LostReplies:  p.lostReplies.Load(),
	}
}

// Close stops the proxy and closes its connections. It may be called more
// than once.
func (p *Proxy) Close() error { return p.relay.Close() }

// conn is the state of one proxied connection.
type conn struct {
	p              *Proxy
	client, server net.Conn

	mu sync.Mutex
	// answering is set once the server has started answering the current
	// request, so that the client's next bytes begin a new one.
	answering bool
	fault     Fault // the current request's
}

func (p *Proxy) serve(client, server net.Conn) {
	c := &conn{p: p, client: client, server: server, answering: true}
	var wg sync.WaitGroup
	wg.Go(func() { c.pump(client, server, c.fromClient) })
	c.pump(server, client, c.fromServer)
	c.cut()
	wg.Wait()
}

// pump copies from src to dst, asking allow, before each chunk, whether
// the chunk may pass.
func (c *conn) pump(src, dst net.Conn, allow func() bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !allow() {
				c.cut()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.cut()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Half-close: the other side may still answer.
				if tcp, ok := dst.(*net.TCPConn); ok {
					_ = tcp.CloseWrite()
					return
				}
			}
			c.cut()
			return
		}
	}
}

// fromClient decides the fate of the client's bytes: the first bytes of a
// request decide the request's.
func (c *conn) fromClient() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answering {
		c.answering = false
		c.fault = c.p.decide(int(c.p.requests.Add(1)))
		if c.fault == LoseRequest {
			c.p.lostRequests.Add(1)
			return false
		}
	}
	return true
}

// fromServer decides the fate of the server's bytes: the first bytes of a
// reply are lost with the rest when the request's fault says so.
func (c *conn) fromServer() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.answering {
		c.answering = true
		if c.fault == LoseReply {
			c.p.lostReplies.Add(1)
			return false
		}
	}
	return true
}

// cut closes both connections, the client's with a reset, as a network
// that fails does.
func (c *conn) cut() {
	if tcp, ok := c.client.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	c.client.Close()
	c.server.Close()
}
