package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/idempotency/httpclient"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/internal/testing/lossyproxy"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence"
)

// Clients that retry through httpclient.Transport, over a network that
// loses requests and replies (lossyproxy), to two server processes behind
// Middleware: every key's side effect happens exactly once, counted by
// the handler, and every client gets the one answer of its key.
//
// LOSSY_SEED replays the random choices of a run: the test logs its seed.
func TestMiddlewareThroughLossyNetwork(t *testing.T) {
	const (
		keys    = 200
		clients = 4 // each sends every key, in an order of its own
		workers = 8 // requests in flight at once, per client
	)
	seed := testenv.Seed(t, "LOSSY_SEED")

	backends.ForEach(t, func(t *testing.T, open func() persistence.Store) {
		var mu sync.Mutex
		effects := map[string]int{}
		var total atomic.Int64
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			mu.Lock()
			effects[string(body)]++ // the side effect
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"order":%s,"charge":%d}`, body, total.Add(1))
		})
		// Duplicates wait for the request in flight, in the process and
		// across processes, rather than answer 409 at once.
		wait := idempotency.WithWait(5 * time.Second)
		var proxies []*lossyproxy.Proxy
		for i := range 2 {
			srv := httptest.NewServer(idempotency.Must(httpapi.Middleware(open(), wait, idempotency.WithLogger(discard())))(handler))
			t.Cleanup(srv.Close)
			// A request in five is lost before the server sees it, and a
			// reply in five after.
			proxies = append(proxies, lossyproxy.Start(t, srv.Listener.Addr().String(), lossyproxy.Random(seed, uint64(i), 0.2, 0.2)))
		}

		type result struct {
			answer   string // status and body
			replayed bool
			attempts int
		}
		results := make([][]result, clients) // [client][key]
		var senders []*http.Client
		for c := range clients {
			results[c] = make([]result, keys)
			senders = append(senders, &http.Client{Transport: &httpclient.Transport{
				Base: &http.Transport{MaxIdleConnsPerHost: workers},
				// With two in five attempts lost, 40 attempts that all fail
				// happen once in 10^16.
				MaxAttempts: 40,
				BaseDelay:   5 * time.Millisecond,
				MaxDelay:    100 * time.Millisecond,
			}})
		}
		lossyproxy.Drive(seed, clients, keys, workers, len(proxies), func(c, k, proxy int) {
			key := "order-" + strconv.Itoa(k)
			req, err := http.NewRequestWithContext(httpclient.WithKey(t.Context(), key), "POST", proxies[proxy].URL+"/orders",
				strings.NewReader(strconv.Quote(key)))
			require.NoError(t, err)
			resp, err := senders[c].Do(req)
			if !assert.NoError(t, err, "key %s", key) {
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.NoError(t, err)
			results[c][k] = result{strconv.Itoa(resp.StatusCode) + " " + string(body), httpclient.Replayed(resp), httpclient.Attempts(resp)}
		})

		replays, attempts := 0, 0
		for k := range keys {
			key := "order-" + strconv.Itoa(k)
			assert.Equal(t, 1, effects[strconv.Quote(key)], "side effects of %s", key)
			for c := range clients {
				r := results[c][k]
				assert.True(t, strings.HasPrefix(r.answer, "201 "), "client %d, %s: %s", c, key, r.answer)
				assert.Equal(t, results[0][k].answer, r.answer, "client %d, %s: one answer per key", c, key)
				attempts += r.attempts
				if r.replayed {
					replays++
				}
			}
		}
		assert.Len(t, effects, keys)
		var stats lossyproxy.Stats
		for _, p := range proxies {
			s := p.Stats()
			stats.Requests += s.Requests
			stats.LostRequests += s.LostRequests
			stats.LostReplies += s.LostReplies
		}
		assert.Positive(t, stats.LostRequests)
		assert.Positive(t, stats.LostReplies)
		t.Logf("%d keys × %d clients: %d side effects; %d requests began at the proxies, %d were lost before the server, %d replies lost after it; "+
			"the clients made %d attempts (besides net/http's own resends), and %d of their %d answers were replays",
			keys, clients, total.Load(), stats.Requests, stats.LostRequests, stats.LostReplies, attempts, replays, keys*clients)
	})
}
