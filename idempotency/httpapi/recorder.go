package httpapi

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"net"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// recorder is the ResponseWriter that Middleware gives the handler: it
// writes the response through to the server's writer, as the handler
// writes it, and records it for the replays.
type recorder struct {
	w http.ResponseWriter
	// before are the headers that the server's writer had when the
	// handler started: those of handlers around the middleware, which are
	// not the handler's and are not recorded.
	before http.Header

	wroteHeader bool
	status      int
	header      http.Header // the handler's headers, when it wrote them
	body        bytes.Buffer
	streamed    bool // the handler flushed: the body is no longer recorded
	hijacked    bool
}

var (
	_ http.Flusher  = (*recorder)(nil)
	_ http.Hijacker = (*recorder)(nil)
)

func newRecorder(w http.ResponseWriter) *recorder {
	return &recorder{w: w, before: w.Header().Clone()}
}

// Header returns the server's writer's header map: the handler writes its
// headers where they will be sent.
func (rec *recorder) Header() http.Header { return rec.w.Header() }

// WriteHeader sends the status code, and records it with the headers the
// handler set. Informational statuses (1xx but 101) go out as they come,
// and are not recorded: they precede the response.
func (rec *recorder) WriteHeader(code int) {
	if !rec.wroteHeader && !rec.hijacked && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		rec.wroteHeader, rec.status = true, code
		rec.header = rec.handlerHeader()
	}
	rec.w.WriteHeader(code)
}

// Write sends p and records it. What the handler writes is recorded, even
// when sending it fails (the client has gone away): its retry gets the
// whole response.
func (rec *recorder) Write(p []byte) (int, error) {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	n, err := rec.w.Write(p)
	if err != http.ErrBodyNotAllowed && !rec.streamed && !rec.hijacked {
		rec.body.Write(p)
	}
	return n, err
}

// FlushError sends what the handler has written so far. The response is
// then streamed, and not recorded: see Middleware.
func (rec *recorder) FlushError() error {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	rec.stream()
	return http.NewResponseController(rec.w).Flush()
}

// Flush is FlushError for http.Flusher, which has no error to return.
func (rec *recorder) Flush() { _ = rec.FlushError() }

func (rec *recorder) stream() {
	rec.streamed = true
	rec.body = bytes.Buffer{}
}

// Hijack hands the connection to the handler, when the server's writer
// supports it (HTTP/1). The response is then written outside the writer,
// and not recorded: see Middleware.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(rec.w).Hijack()
	if err == nil {
		rec.hijacked = true
		rec.stream()
	}
	return conn, brw, err
}

// restoreHeader sets the server's writer's headers back to what they were
// before the handler ran, as http.Error drops a Content-Length the
// handler set: an answer in place of the handler's response must carry
// none of its headers (a length, an encoding, a cookie, a location).
func (rec *recorder) restoreHeader() {
	h := rec.w.Header()
	for k := range h {
		if _, ok := rec.before[k]; !ok {
			delete(h, k)
		}
	}
	for k, v := range rec.before {
		h[k] = v
	}
}

// Unwrap returns the server's writer, for http.ResponseController.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// handlerHeader returns the headers that the handler set: those of the
// server's writer that were not there, with the same values, before it
// ran. Trailers (http.TrailerPrefix) are left out: they come at the end.
func (rec *recorder) handlerHeader() http.Header {
	h := make(http.Header, len(rec.w.Header()))
	for k, v := range rec.w.Header() {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		if old, ok := rec.before[k]; ok && slices.Equal(old, v) {
			continue
		}
		h[k] = slices.Clone(v)
	}
	return h
}

// result returns the response to store, once the handler has returned.
func (rec *recorder) result() *response {
	if !rec.wroteHeader && !rec.hijacked {
		// net/http sends 200 and the headers once the handler returns.
		rec.wroteHeader, rec.status = true, http.StatusOK
		rec.header = rec.handlerHeader()
	}
	switch {
	case rec.hijacked:
		return &response{StatusCode: rec.status, NotReplayable: notReplayableHijacked}
	case rec.streamed:
		return &response{StatusCode: rec.status, NotReplayable: notReplayableStreamed}
	}
	resp := &response{StatusCode: rec.status, Trailers: rec.trailers()}
	if len(rec.header) > 0 {
		resp.MultiValueHeaders = rec.header
	}
	if body := rec.body.Bytes(); utf8.Valid(body) {
		resp.Body = string(body)
	} else {
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return resp
}

// trailers returns the trailers that the handler set, as net/http sends
// them: the values, at the end, of the names declared in the Trailer
// header, and the headers named with http.TrailerPrefix.
func (rec *recorder) trailers() map[string][]string {
	var t http.Header
	add := func(name string, values []string) {
		if t == nil {
			t = make(http.Header)
		}
		t[http.CanonicalHeaderKey(name)] = slices.Clone(values)
	}
	final := rec.w.Header()
	for _, declared := range rec.header["Trailer"] {
		for name := range strings.SplitSeq(declared, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if v, ok := final[http.CanonicalHeaderKey(name)]; ok {
					add(name, v)
				}
			}
		}
	}
	for k, v := range final {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			add(name, v)
		}
	}
	return t
}

// writeResponse sends resp, stored or made by the engine, on w: its
// headers (where the event types keep them, for responses that Lambda
// adapters stored), its status, its body and its trailers.
func writeResponse(w http.ResponseWriter, resp *response) {
	h := w.Header()
	for k, v := range resp.Headers {
		if _, ok := resp.MultiValueHeaders[k]; !ok {
			h[k] = []string{v}
		}
	}
	for k, v := range resp.MultiValueHeaders {
		h[k] = slices.Clone(v)
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if decoded, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = decoded
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body) // a client that went away retries
	for k, v := range resp.Trailers {
		h[http.TrailerPrefix+k] = slices.Clone(v)
	}
}
