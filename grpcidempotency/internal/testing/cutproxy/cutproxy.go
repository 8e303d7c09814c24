// Package cutproxy is a TCP proxy for tests that cuts the reply to a call
// part way through, as a connection that breaks does: before its header,
// inside its message, or before what ends it. The call itself reaches the
// server, which runs it: only an idempotency key makes a retry safe.
//
// It speaks HTTP/1.1 and HTTP/2 without TLS (with prior knowledge, as gRPC
// clients do) as far as this. It reads each reply whole before it decides
// the reply's fate, so that the server has finished the call when its
// reply is cut. Replies are numbered from 1 across connections, in the
// order their ends arrive. A cut reply reaches the client in part, and the
// proxy then ends the client's connection, with a reset or a close.
//
// Over HTTP/1.1 the proxy sends every reply with chunked framing, as a
// proxy may, so that a reply can stop short of its end.
package cutproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2/hpack"

	"github.com/retrysafe/retrysafe/internal/testing/relay"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// Point is where a reply is cut.
type Point int

const (
	// Pass sends the whole reply.
	Pass Point = iota
	// BeforeHeader sends nothing of the reply.
	BeforeHeader
	// InMessage sends the reply's header and the first half of its
	// message (after the 5 bytes of its envelope, when it has one).
	InMessage
	// BeforeEnd sends the reply's header and its whole message, but not
	// what ends the reply: gRPC's trailers, gRPC-Web's trailer message,
	// the end of the body (HTTP/1.1's last chunk, HTTP/2's END_STREAM).
	BeforeEnd
)

func (p Point) String() string {
	switch p {
	case Pass:
		return "Pass"
	case BeforeHeader:
		return "BeforeHeader"
	case InMessage:
		return "InMessage"
	case BeforeEnd:
		return "BeforeEnd"
	}
	return fmt.Sprintf("Point(%d)", int(p))
}

// Cuts returns every cut: at each point, with a reset and with a close,
// and over HTTP/2 after a GOAWAY too.
func Cuts(http2 bool) []Cut {
	var cuts []Cut
	for _, at := range []Point{BeforeHeader, InMessage, BeforeEnd} {
		for _, goAway := range []bool{false, true} {
			if goAway && !http2 {
				continue
			}
			cuts = append(cuts, Cut{At: at, GoAway: goAway}, Cut{At: at, GoAway: goAway, Close: true})
		}
	}
	return cuts
}

// Cut is the fate of a reply.
type Cut struct {
	At Point
	// Close ends the client's connection with a FIN, as a peer that
	// closes it does. Otherwise the proxy resets it (RST), as a network
	// that fails does.
	Close bool
	// GoAway sends, over HTTP/2, a GOAWAY that lets the reply's stream
	// finish before the cut, as a server that shuts down gracefully does
	// before its grace period runs out.
	GoAway bool
}

func (c Cut) String() string {
	s := c.At.String()
	if c.GoAway {
		s += "/goaway"
	}
	if c.Close {
		return s + "/close"
	}
	return s + "/reset"
}

// Stats counts what the proxy did.
type Stats struct {
	Connections, Replies, Cuts int64
}

// Proxy is a running proxy.
type Proxy struct {
	// Addr is the proxy's address, "127.0.0.1:<port>".
	Addr string
	// URL is "http://" + Addr.
	URL string

	decide func(n int) Cut
	relay  *relay.Relay

	replies, cuts atomic.Int64
}

// Start starts a proxy to the TCP address upstream for the test tb, and
// closes it when tb ends. decide chooses the fate of reply n (from 1); it
// is called concurrently, and nil passes every reply.
func Start(tb testenv.TB, upstream string, decide func(n int) Cut) *Proxy {
	tb.Helper()
	if decide == nil {
		decide = func(int) Cut { return Cut{} }
	}
	p := &Proxy{decide: decide}
	r, err := relay.Start(upstream, p.serve)
	if err != nil {
		tb.Fatal(err)
	}
	p.relay, p.Addr = r, r.Addr
	p.URL = "http://" + p.Addr
	tb.Cleanup(p.Close)
	return p
}

// First returns a decide function for Start that cuts the first reply as
// c says and passes the others.
func First(c Cut) func(n int) Cut {
	return func(n int) Cut {
		if n == 1 {
			return c
		}
		return Cut{}
	}
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{Connections: p.relay.Connections(), Replies: p.replies.Load(), Cuts: p.cuts.Load()}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() { _ = p.relay.Close() }

// preface is the client's first bytes on an HTTP/2 connection.
const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// serve proxies one connection: the client's bytes as they come, the
// server's replies as their fates say.
func (p *Proxy) serve(client, server net.Conn) {
	// A request line and its headers are longer than the preface.
	first := make([]byte, len(preface))
	if _, err := io.ReadFull(client, first); err != nil {
		return
	}
	if _, err := server.Write(first); err != nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		_, _ = io.Copy(server, client)
		// After a close, the client's last bytes (an acknowledgement, a
		// window update) are read until it closes too, so that its
		// connection ends with the FIN alone, not a reset for unread bytes.
		_, _ = io.Copy(io.Discard, client)
		server.Close()
	})
	var cut *Cut
	if string(first) == preface {
		cut = p.replies2(bufio.NewReader(server), client)
	} else {
		cut = p.replies1(bufio.NewReader(server), client)
	}
	server.Close()
	tcp, _ := client.(*net.TCPConn)
	switch {
	case cut != nil && cut.Close && tcp != nil:
		_ = tcp.CloseWrite()
		return // the client closes, and the copy above ends
	case cut != nil && tcp != nil:
		_ = tcp.SetLinger(0)
	}
	client.Close()
}

// decideNext returns the fate of the next reply, or nil to pass it.
func (p *Proxy) decideNext() *Cut {
	c := p.decide(int(p.replies.Add(1)))
	if c.At == Pass {
		return nil
	}
	p.cuts.Add(1)
	return &c
}

// replies1 copies HTTP/1.1 replies from server to client until one is
// cut, which it returns, or a connection fails.
func (p *Proxy) replies1(server *bufio.Reader, client io.Writer) *Cut {
	for {
		resp, err := http.ReadResponse(server, nil)
		if err != nil {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil
		}
		cut := p.decideNext()
		if cut == nil {
			if write1(client, resp, body, true) != nil {
				return nil
			}
			continue
		}
		if cut.At != BeforeHeader {
			_ = write1(client, resp, body[:part(cut.At, resp.Header.Get("Content-Type"), body)], false)
		}
		return cut
	}
}

// write1 writes resp with body, in chunks, and its end when end is set.
func write1(w io.Writer, resp *http.Response, body []byte, end bool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
	h := resp.Header.Clone()
	h.Del("Content-Length")
	h.Set("Transfer-Encoding", "chunked")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	if len(body) > 0 {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(body), body)
	}
	if end {
		b.WriteString("0\r\n")
		_ = resp.Trailer.Write(&b)
		b.WriteString("\r\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// HTTP/2 frame types and flags.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameGoAway       = 0x7
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// reply2 is an HTTP/2 reply that the proxy holds until its end.
type reply2 struct {
	cut         *Cut
	header      [][]byte // the frames of its header block
	headerDone  bool
	contentType string
	body        []byte
	ended       bool
}

// replies2 copies HTTP/2 frames from server to client, holding each reply
// whose fate is a cut until it ends, until a reply is cut, which it
// returns, or a connection fails. It decodes every header block, to keep
// the table of header compression that the server and the client share.
func (p *Proxy) replies2(server *bufio.Reader, client io.Writer) *Cut {
	dec := hpack.NewDecoder(4096, nil)
	dec.SetAllowedMaxDynamicTableSize(1 << 20)
	var (
		block   []byte  // a header block in progress
		blockOf *reply2 // the held reply it is the header of, if any
		seen    = map[uint32]bool{}
		held    = map[uint32]*reply2{}
	)
	for {
		frame, typ, flags, stream, err := readFrame(server)
		if err != nil {
			return nil
		}
		payload := frame[9:]
		if typ == frameHeaders && stream%2 == 1 && !seen[stream] {
			seen[stream] = true
			if cut := p.decideNext(); cut != nil {
				held[stream] = &reply2{cut: cut}
			}
		}
		r := held[stream]
		switch typ {
		case frameHeaders, frameContinuation:
			fragment := payload
			if typ == frameHeaders {
				fragment = headerFragment(payload, flags)
				blockOf = nil
				if r != nil && !r.headerDone {
					blockOf = r
				}
			}
			if blockOf != nil {
				blockOf.header = append(blockOf.header, frame)
			}
			block = append(block, fragment...)
			if flags&flagEndHeaders != 0 {
				fields, err := dec.DecodeFull(block)
				if err != nil {
					return nil
				}
				if blockOf != nil {
					blockOf.headerDone = true
					for _, f := range fields {
						if f.Name == "content-type" {
							blockOf.contentType = f.Value
						}
					}
				}
				block, blockOf = nil, nil
			}
		case frameData:
			if r != nil {
				r.body = append(r.body, dataOf(payload, flags)...)
			}
		case frameRSTStream:
			if r != nil {
				return r.cut
			}
		}
		if r == nil {
			if _, err := client.Write(frame); err != nil {
				return nil
			}
			continue
		}
		if typ != frameContinuation && flags&flagEndStream != 0 && (typ == frameData || typ == frameHeaders) {
			r.ended = true
		}
		if r.ended && block == nil {
			r.send(client, stream)
			return r.cut
		}
	}
}

// send writes what the client gets of r, a reply on stream.
func (r *reply2) send(w io.Writer, stream uint32) {
	var b bytes.Buffer
	defer func() { _, _ = w.Write(b.Bytes()) }()
	if r.cut.GoAway {
		var f [9 + 8]byte
		f[2] = 8
		f[3] = frameGoAway
		binary.BigEndian.PutUint32(f[9:], stream) // the last stream; NO_ERROR
		b.Write(f[:])
	}
	if r.cut.At == BeforeHeader {
		return
	}
	for _, f := range r.header {
		if f[4]&flagEndStream != 0 && f[3] == frameHeaders {
			return // a reply without a body: its header ends it
		}
	}
	for _, f := range r.header {
		b.Write(f)
	}
	if n := part(r.cut.At, r.contentType, r.body); n > 0 {
		var h [9]byte
		h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n)
		h[3] = frameData
		binary.BigEndian.PutUint32(h[5:], stream)
		b.Write(h[:])
		b.Write(r.body[:n])
	}
}

// readFrame reads an HTTP/2 frame: its 9 bytes of header and its payload.
func readFrame(r io.Reader) (frame []byte, typ, flags byte, stream uint32, err error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, 0, 0, 0, err
	}
	length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	frame = make([]byte, 9+length)
	copy(frame, h[:])
	if _, err := io.ReadFull(r, frame[9:]); err != nil {
		return nil, 0, 0, 0, err
	}
	return frame, h[3], h[4], binary.BigEndian.Uint32(h[5:]) & 0x7fffffff, nil
}

// headerFragment returns the header block fragment of a HEADERS frame's
// payload.
func headerFragment(p []byte, flags byte) []byte {
	p = unpad(p, flags)
	if flags&flagPriority != 0 && len(p) >= 5 {
		p = p[5:]
	}
	return p
}

// dataOf returns the data of a DATA frame's payload.
func dataOf(p []byte, flags byte) []byte { return unpad(p, flags) }

// unpad removes the padding of a frame's payload.
func unpad(p []byte, flags byte) []byte {
	if flags&flagPadded == 0 || len(p) == 0 {
		return p
	}
	pad := int(p[0])
	if pad >= len(p) {
		return nil
	}
	return p[1 : len(p)-pad]
}

// part returns how much of body, the body of a reply of contentType,
// reaches the client when the reply is cut at at. The message is the
// whole body, or the body's first envelope in the gRPC, gRPC-Web and
// Connect streaming protocols.
func part(at Point, contentType string, body []byte) int {
	start, end := 0, len(body)
	if enveloped(contentType) && len(body) >= 5 {
		start, end = 5, min(len(body), 5+int(binary.BigEndian.Uint32(body[1:5])))
	}
	switch at {
	case InMessage:
		return start + (end-start)/2
	case BeforeEnd:
		return end
	}
	return 0
}

func enveloped(contentType string) bool {
	return strings.HasPrefix(contentType, "application/grpc") || strings.HasPrefix(contentType, "application/connect+")
}
