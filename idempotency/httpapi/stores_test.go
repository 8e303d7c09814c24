package httpapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/idempotency/httpclient"
	"github.com/retrysafe/retrysafe/internal/testing/backends"
	"github.com/retrysafe/retrysafe/persistence"
)

// The tests of the middleware over real servers (dynalite and DynamoDB
// Local, shared by the tests of the binary; a redis-server of each test's
// own) on 127.0.0.1. They skip when a server cannot start, and fail
// instead with IDEMPOTENCY_REQUIRE_INTEGRATION=1.

func TestMain(m *testing.M) { backends.Main(m) }

// TestMiddlewareStores runs the middleware over each store, as two server
// processes with one database: what one process completed, the other
// replays; what one holds, the other refuses with 409; a burst of
// duplicates across both runs the handler once.
func TestMiddlewareStores(t *testing.T) {
	backends.ForEach(t, func(t *testing.T, open func() persistence.Store) {
		var h runs
		hold := make(chan struct{})
		entered := make(chan struct{}, 1)
		handler := h.handle(func(w http.ResponseWriter, r *http.Request, run int) {
			if r.URL.Path == "/hold" {
				entered <- struct{}{}
				<-hold
			}
			w.Header().Set("Trailer", "X-Run")
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte{0, 1, 2, 0xff, 0xfe, byte(run)}) // not UTF-8: stored base64-encoded
			w.Header().Set("X-Run", strconv.Itoa(run))
		})
		a := serve(t, open(), handler)
		b := serve(t, open(), handler)
		client := &http.Client{}
		t.Cleanup(client.CloseIdleConnections)

		first := do(t, client, "POST", a+"/orders", "application/json", `{"item":"book"}`, "Idempotency-Key", "k1")
		require.Equal(t, http.StatusCreated, first.status, string(first.body))
		replay := do(t, client, "POST", b+"/orders", "application/json", `{"item":"book"}`, "Idempotency-Key", "k1")
		assert.Equal(t, "true", replay.header.Get(httpapi.HeaderReplayed), "the other process replays")
		assert.Equal(t, first.body, replay.body)
		assert.Equal(t, first.comparable(), replay.comparable())
		reused := do(t, client, "POST", b+"/orders", "application/json", `{"item":"pen"}`, "Idempotency-Key", "k1")
		assert.Equal(t, http.StatusUnprocessableEntity, reused.status)
		assert.Equal(t, 1, h.count())

		done := make(chan answer)
		go func() {
			a, err := tryDo(t.Context(), client, "POST", a+"/hold", "application/json", `{}`, "Idempotency-Key", "k2")
			assert.NoError(t, err)
			done <- a
		}()
		<-entered
		busy := do(t, client, "POST", b+"/hold", "application/json", `{}`, "Idempotency-Key", "k2")
		assert.Equal(t, http.StatusConflict, busy.status)
		assert.Equal(t, httpapi.ProblemKeyInUse, busy.problem(t).Type)
		assert.NotEmpty(t, busy.header.Get("Retry-After"))
		close(hold)
		held := <-done
		replay = do(t, client, "POST", b+"/hold", "application/json", `{}`, "Idempotency-Key", "k2")
		assert.Equal(t, held.body, replay.body)
		assert.Equal(t, 2, h.count())

		// A burst of duplicates to two processes that wait for the
		// outcome of the request in flight (idempotency.WithWait), through
		// clients that retry what still gets 409: one run, one answer.
		a = serve(t, open(), handler, idempotency.WithWait(10*time.Second))
		b = serve(t, open(), handler, idempotency.WithWait(10*time.Second))
		transport := &httpclient.Transport{BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond, MaxAttempts: 20}
		burst := &http.Client{Transport: transport}
		bodies := make([][]byte, 16)
		var wg sync.WaitGroup
		for i := range bodies {
			wg.Go(func() {
				url := []string{a, b}[i%2] + "/orders"
				req, err := http.NewRequestWithContext(httpclient.WithKey(t.Context(), "k3"), "POST", url, strings.NewReader(`{"burst":true}`))
				require.NoError(t, err)
				resp, err := burst.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				defer resp.Body.Close()
				assert.Equal(t, http.StatusCreated, resp.StatusCode)
				bodies[i], err = io.ReadAll(resp.Body)
				assert.NoError(t, err)
				assert.Equal(t, strconv.Itoa(int(bodies[i][5])), resp.Trailer.Get("X-Run"), "the trailers are replayed")
			})
		}
		wg.Wait()
		assert.Equal(t, 3, h.count(), "the burst ran the handler once")
		for _, body := range bodies {
			assert.Equal(t, bodies[0], body)
		}
	})
}
