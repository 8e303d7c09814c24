package lossyproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/lossyproxy"
)

// Requests through the proxy on one kept-alive connection at a time: each
// fault loses what it says, and the server sees exactly the requests that
// reached it.
func TestFaults(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, string(body))
		mu.Unlock()
		_, _ = io.WriteString(w, "got "+string(body))
	}))
	t.Cleanup(srv.Close)
	faults := []lossyproxy.Fault{lossyproxy.Pass, lossyproxy.LoseRequest, lossyproxy.Pass, lossyproxy.LoseReply, lossyproxy.Pass, lossyproxy.Pass}
	p := lossyproxy.Start(t, srv.Listener.Addr().String(), func(n int) lossyproxy.Fault { return faults[n-1] })
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)

	for i, f := range faults {
		// A POST without an idempotency key, which net/http does not send
		// again by itself on a broken connection.
		resp, err := client.Post(p.URL, "text/plain", strings.NewReader(strconv.Itoa(i+1)))
		if f != lossyproxy.Pass {
			require.Error(t, err, "request %d", i+1)
			continue
		}
		require.NoError(t, err, "request %d", i+1)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "got "+strconv.Itoa(i+1), string(body))
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"1", "3", "4", "5", "6"}, seen, "a lost request never reaches the server; a lost reply does")
	assert.Equal(t, lossyproxy.Stats{Connections: 3, Requests: 6, LostRequests: 1, LostReplies: 1}, p.Stats())
}

func TestCloseClosesConnections(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	p, err := lossyproxy.New(srv.Listener.Addr().String(), nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Get(p.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "twice")
	_, err = client.Get(p.URL)
	assert.Error(t, err, "nothing listens any more")
}
