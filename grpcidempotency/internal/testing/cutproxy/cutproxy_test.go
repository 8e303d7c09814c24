package cutproxy

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reply of two envelopes, a message and gRPC-Web's trailers, through the
// proxy over HTTP/1.1 and HTTP/2: the client gets what each point lets
// through, and then an error; the server has answered every request.
func TestCuts(t *testing.T) {
	body := "\x00\x00\x00\x00\x0chello world!" + "\x80\x00\x00\x00\x10grpc-status: 0\r\n"
	for _, http2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP1.1", true: "HTTP2"}[http2], func(t *testing.T) {
			var served atomic.Int64
			srv := &http.Server{ReadHeaderTimeout: time.Minute, Protocols: new(http.Protocols), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served.Add(1)
				w.Header().Set("Content-Type", "application/grpc-web+proto")
				_, _ = io.WriteString(w, body)
			})}
			srv.Protocols.SetHTTP1(true)
			srv.Protocols.SetUnencryptedHTTP2(true)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })
			tr := &http.Transport{Protocols: new(http.Protocols)}
			if http2 {
				tr.Protocols.SetUnencryptedHTTP2(true)
			} else {
				tr.Protocols.SetHTTP1(true)
			}
			client := &http.Client{Transport: tr}
			t.Cleanup(tr.CloseIdleConnections)

			for _, tc := range []struct {
				cut  Cut
				want string
			}{
				{Cut{At: BeforeHeader}, ""},
				{Cut{At: InMessage}, body[:5+6]},
				{Cut{At: BeforeEnd, Close: true}, body[:5+12]},
				{Cut{At: InMessage, GoAway: true}, body[:5+6]},
				{Cut{}, body},
			} {
				name := tc.cut.String()
				p := Start(t, ln.Addr().String(), First(tc.cut))
				before := served.Load()
				resp, err := client.Post(p.URL, "application/grpc-web+proto", nil)
				assert.Equal(t, before+1, served.Load(), "%s: the server answered", name)
				if tc.cut.At == BeforeHeader {
					assert.Error(t, err, name)
					continue
				}
				require.NoError(t, err, name)
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, tc.want, string(got), name)
				if tc.cut.At == Pass {
					assert.NoError(t, err, name)
					assert.Equal(t, Stats{Connections: 1, Replies: 1}, p.Stats())
					continue
				}
				assert.Error(t, err, name)
				assert.Equal(t, Stats{Connections: 1, Replies: 1, Cuts: 1}, p.Stats(), name)
			}
		})
	}
}
