// Package lossyh2 is a TCP proxy for tests that loses what a flaky
// network loses between a gRPC client and a server on 127.0.0.1, as
// package lossyproxy does for HTTP/1.1: a call, before the server sees
// it, or the server's reply, after the server has processed the call. It
// does so by cutting the connection, which ends every call on it: the
// client sees UNAVAILABLE, and only an idempotency key tells a safe retry
// from a second side effect.
//
// It reads HTTP/2 frames as far as this: a HEADERS frame from the client
// on a stream it has not seen begins a call, numbered from 1 across
// connections; a HEADERS frame from the server on that stream begins the
// reply, which a gRPC server sends once the handler of a unary call has
// returned.
package lossyh2

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/retrysafe/retrysafe/internal/testing/lossyproxy"
	"github.com/retrysafe/retrysafe/internal/testing/relay"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// Stats counts what the proxy did.
type Stats struct {
	Connections, Calls, LostCalls, LostReplies int64
}

// Proxy is a running proxy.
type Proxy struct {
	// Addr is the proxy's address, "127.0.0.1:<port>".
	Addr string

	decide func(n int) lossyproxy.Fault
	relay  *relay.Relay

	calls, lostCalls, lostReplies atomic.Int64
}

// Start starts a proxy to upstream for the test tb, and closes it when tb
// ends. decide chooses the fate of call n (from 1), as lossyproxy.Random
// does: lossyproxy.LoseRequest loses the call, lossyproxy.LoseReply its
// reply. nil passes every call.
func Start(tb testenv.TB, upstream string, decide func(n int) lossyproxy.Fault) *Proxy {
	tb.Helper()
	if decide == nil {
		decide = func(int) lossyproxy.Fault { return lossyproxy.Pass }
	}
	p := &Proxy{decide: decide}
	r, err := relay.Start(upstream, p.serve)
	if err != nil {
		tb.Fatal(err)
	}
	p.relay, p.Addr = r, r.Addr
	tb.Cleanup(p.Close)
	return p
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{Connections: p.relay.Connections(), Calls: p.calls.Load(), LostCalls: p.lostCalls.Load(), LostReplies: p.lostReplies.Load()}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() { _ = p.relay.Close() }

// serve proxies one connection.
func (p *Proxy) serve(client, server net.Conn) {
	var (
		mu   sync.Mutex
		lose = map[uint32]bool{} // streams whose reply is lost
		last uint32              // the highest stream the client opened
	)
	cut := func() { client.Close(); server.Close() }
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cut()
		preface := make([]byte, 24)
		if _, err := io.ReadFull(client, preface); err != nil {
			return
		}
		if _, err := server.Write(preface); err != nil {
			return
		}
		_ = frames(client, server, func(typ byte, stream uint32) bool {
			if typ != typeHeaders || stream%2 == 0 || stream <= last {
				return true
			}
			last = stream
			switch p.decide(int(p.calls.Add(1))) {
			case lossyproxy.LoseRequest:
				p.lostCalls.Add(1)
				return false
			case lossyproxy.LoseReply:
				mu.Lock()
				lose[stream] = true
				mu.Unlock()
			}
			return true
		})
	})
	wg.Go(func() {
		defer cut()
		_ = frames(server, client, func(typ byte, stream uint32) bool {
			if typ != typeHeaders {
				return true
			}
			mu.Lock()
			lost := lose[stream]
			mu.Unlock()
			if lost {
				p.lostReplies.Add(1)
			}
			return !lost
		})
	})
	wg.Wait()
}

const typeHeaders = 0x1

// frames copies HTTP/2 frames from src to dst until pass, told each
// frame's type and stream, returns false, or a connection fails.
func frames(src io.Reader, dst io.Writer, pass func(typ byte, stream uint32) bool) error {
	var header [9]byte
	for {
		if _, err := io.ReadFull(src, header[:]); err != nil {
			return err
		}
		length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
		stream := binary.BigEndian.Uint32(header[5:]) & 0x7fffffff
		if !pass(header[3], stream) {
			return errors.New("lossyh2: cut")
		}
		frame := make([]byte, 9+length)
		copy(frame, header[:])
		if _, err := io.ReadFull(src, frame[9:]); err != nil {
			return err
		}
		if _, err := dst.Write(frame); err != nil {
			return err
		}
	}
}

// Random returns a decide function for Start, and for lossyproxy's
// proxies, that loses a call before the server with probability
// lostCalls, and a reply after it with probability lostReplies. The fate
// of call n depends on seed, stream (one for each proxy of a test) and n
// alone, through SplitMix64, so that a run can be replayed from its seed.
//
// lossyproxy.Random draws the first output of a PCG whose increment is
// made of stream and n: for one seed, those outputs are close to an
// affine function of n, so that a seed may lose nothing in a hundred
// calls, or many in a row.
func Random(seed, stream uint64, lostCalls, lostReplies float64) func(n int) lossyproxy.Fault {
	return func(n int) lossyproxy.Fault {
		p := float64(splitmix64(seed^splitmix64(stream<<32|uint64(n)))>>11) / (1 << 53)
		switch {
		case p < lostCalls:
			return lossyproxy.LoseRequest
		case p < lostCalls+lostReplies:
			return lossyproxy.LoseReply
		}
		return lossyproxy.Pass
	}
}

// splitmix64 is the output function of SplitMix64 (Steele, Lea and
// Flood), a bijection that mixes every bit of x into every bit of the
// result.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Scheduled returns decide, except that the first calls meet the faults of
// first, in order: so that a test's faults happen whatever its seed draws.
func Scheduled(decide func(n int) lossyproxy.Fault, first ...lossyproxy.Fault) func(n int) lossyproxy.Fault {
	return func(n int) lossyproxy.Fault {
		if n <= len(first) {
			return first[n-1]
		}
		return decide(n)
	}
}
