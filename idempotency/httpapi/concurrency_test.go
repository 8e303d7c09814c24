package httpapi_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

const callers = 40

// Many requests with one key race: the handler runs once, and every other
// request gets either 409 or the replay of its response.
func TestConcurrentRequestsRunOnce(t *testing.T) {
	forEachEventType(t, func(t *testing.T, et eventType) {
		var a app
		send := et.wrap(t, a.handle, memory.New())
		start := make(chan struct{})
		results := make([]httpResp, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = send(t.Context(), post("k1", orderA))
			})
		}
		close(start)
		wg.Wait()

		require.Equal(t, 1, a.count(), "the handler runs once")
		var original *httpResp
		var replays, conflicts int
		for i, resp := range results {
			require.NoError(t, errs[i])
			switch {
			case resp.status == http.StatusConflict:
				conflicts++
				assert.Equal(t, httpapi.ProblemKeyInUse, problemOf(t, resp).Type)
				assert.NotEmpty(t, resp.headers.Get("Retry-After"))
			case resp.headers.Get(httpapi.HeaderReplayed) == "true":
				replays++
			default:
				require.Nil(t, original, "only one response is not a replay")
				original = &results[i]
			}
		}
		require.NotNil(t, original)
		assert.Equal(t, http.StatusCreated, original.status)
		assert.Equal(t, callers, 1+replays+conflicts)
		for _, resp := range results {
			if resp.status != http.StatusConflict {
				assert.Equal(t, *original, withoutReplayHeader(resp))
			}
		}
	})
}

// While the handler holds the key, every other request with it gets 409;
// once it completes, they get its response.
func TestDuplicatesWhileInFlight(t *testing.T) {
	forEachEventType(t, func(t *testing.T, et eventType) {
		entered, release := make(chan struct{}), make(chan struct{})
		var runs atomic.Int32
		a := app{respond: func(run int, _ httpReq) (httpResp, error) {
			runs.Add(1)
			close(entered)
			<-release
			return created(run), nil
		}}
		send := et.wrap(t, a.handle, memory.New())
		var first httpResp
		var wg sync.WaitGroup
		wg.Go(func() {
			var err error
			first, err = send(t.Context(), post("k1", orderA))
			assert.NoError(t, err)
		})
		<-entered

		var conflicts atomic.Int32
		var dups sync.WaitGroup
		for range callers {
			dups.Go(func() {
				resp, err := send(t.Context(), post("k1", orderA))
				assert.NoError(t, err)
				if resp.status == http.StatusConflict {
					conflicts.Add(1)
				}
			})
		}
		dups.Wait()
		assert.Equal(t, int32(callers), conflicts.Load())

		close(release)
		wg.Wait()
		replay, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, first, withoutReplayHeader(replay))
		assert.Equal(t, int32(1), runs.Load())
	})
}
