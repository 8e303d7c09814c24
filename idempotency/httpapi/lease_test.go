package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A server's requests have no deadline: the reservation is a lease, which
// the middleware's Guard renews while the handler runs. These tests run in
// a synctest bubble, where time is fake, without a network: requests go
// to the handler in the process.

// otherProcess is a store over the same records as its Store, as another
// server process sees them: a value of its own, so that calls through it
// do not share the flights of calls through the Store (they ask the store).
type otherProcess struct{ persistence.Store }

// deadProcess drops the renewals of reservations (the Updates of records
// still in progress), as the store sees a process that was killed: it
// renews nothing. Completions pass.
type deadProcess struct{ persistence.Store }

func (s deadProcess) Update(ctx context.Context, rec *persistence.Record) error {
	if rec.Status == persistence.StatusInProgress {
		return nil
	}
	return s.Store.Update(ctx, rec)
}

// send serves one POST with key through h, in the process.
func send(h http.Handler, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/reports", strings.NewReader(`{"month":"2026-11"}`))
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// slowHandler takes d, then answers 201 with the run's number.
func slowHandler(c *runs, d time.Duration) http.Handler {
	return c.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		time.Sleep(d)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte{byte('0' + run)})
	})
}

// A handler that runs for three leases keeps its key: duplicates, in this
// process and in another, get 409 (or wait, with WithWait) and never run
// it a second time.
func TestMiddlewareLeaseIsRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var c runs
		h := slowHandler(&c, 3*defaultLease)
		here := idempotency.Must(httpapi.Middleware(store))(h)
		there := idempotency.Must(httpapi.Middleware(otherProcess{store}))(h)
		waiting := idempotency.Must(httpapi.Middleware(otherProcess{store}, idempotency.WithWait(time.Hour)))(h)

		var wg sync.WaitGroup
		var first, waited *httptest.ResponseRecorder
		wg.Go(func() { first = send(here, "k1") })
		synctest.Wait()
		wg.Go(func() { waited = send(waiting, "k1") })
		for range 5 {
			time.Sleep(defaultLease / 2)
			for _, h := range []http.Handler{here, there} {
				dup := send(h, "k1")
				require.Equal(t, http.StatusConflict, dup.Code, "the lease was renewed")
				assert.Equal(t, httpapi.ProblemKeyInUse, problemType(t, dup))
			}
		}
		wg.Wait()
		assert.Equal(t, http.StatusCreated, first.Code)
		assert.Equal(t, "1", first.Body.String())
		assert.Equal(t, "1", waited.Body.String(), "the waiting duplicate gets the response")
		assert.Equal(t, "true", waited.Header().Get(httpapi.HeaderReplayed))
		replay := send(there, "k1")
		assert.Equal(t, "1", replay.Body.String())
		assert.Equal(t, 1, c.count(), "never a second run")
	})
}

// A server that dies stops renewing its reservations: another process
// takes the key over within one lease (idempotency.WithLease sets it).
func TestMiddlewareLeaseLapsesWhenRenewalsStop(t *testing.T) {
	for _, lease := range []time.Duration{defaultLease, 5 * time.Second} {
		t.Run(lease.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := []any{idempotency.WithLogger(discard())}
				if lease != defaultLease {
					opts = append(opts, idempotency.WithLease(lease))
				}
				store := memory.New()
				var c runs
				hang := make(chan struct{})
				dying := idempotency.Must(httpapi.Middleware(deadProcess{store}, as[idempotency.MiddlewareOption](opts)...))(c.handle(func(w http.ResponseWriter, r *http.Request, run int) {
					<-hang // the process is gone: its handler never finishes
				}))
				there := idempotency.Must(httpapi.Middleware(otherProcess{store}, as[idempotency.MiddlewareOption](opts)...))(slowHandler(&c, 0))

				var wg sync.WaitGroup
				wg.Go(func() { send(dying, "k1") })
				synctest.Wait()
				time.Sleep(lease - time.Second)
				assert.Equal(t, http.StatusConflict, send(there, "k1").Code, "within the lease")
				time.Sleep(2 * time.Second)
				resp := send(there, "k1")
				assert.Equal(t, http.StatusCreated, resp.Code, "one lease after the reservation, the key is free")
				assert.Equal(t, "2", resp.Body.String())
				close(hang)
				wg.Wait()
				assert.Equal(t, "2", send(there, "k1").Body.String(), "the dead process's late completion is fenced out")
			})
		})
	}
}

// With WithHoldUntilReleased, the key of a server that died while its
// handler ran is not taken over when its lease lapses: retries get 409
// key-held, without Retry-After, until an operator releases the key.
func TestMiddlewareHoldsTheKeyOfADeadProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := []idempotency.MiddlewareOption{idempotency.WithLogger(discard()), idempotency.WithHoldUntilReleased()}
		store := memory.New()
		var c runs
		hang := make(chan struct{})
		dying := idempotency.Must(httpapi.Middleware(deadProcess{store}, opts...))(c.handle(func(w http.ResponseWriter, r *http.Request, run int) {
			<-hang
		}))
		there := idempotency.Must(httpapi.Middleware(otherProcess{store}, opts...))(slowHandler(&c, 0))

		var wg sync.WaitGroup
		wg.Go(func() { send(dying, "k1") })
		synctest.Wait()
		time.Sleep(defaultLease + time.Second)
		held := send(there, "k1")
		require.Equal(t, http.StatusConflict, held.Code)
		assert.Equal(t, httpapi.ProblemKeyHeld, problemType(t, held))
		assert.Empty(t, held.Header().Get("Retry-After"), "no delay ends a hold")
		assert.Equal(t, 1, c.count(), "the retry did not run")

		// The operator releases the key: the next retry runs.
		var rec *persistence.Record
		require.NoError(t, store.List(t.Context(), "", 0, func(page []*persistence.Record) error {
			require.Len(t, page, 1)
			rec = page[0]
			return nil
		}))
		require.True(t, rec.Held)
		require.NoError(t, store.DeleteRecord(t.Context(), rec))
		resp := send(there, "k1")
		assert.Equal(t, http.StatusCreated, resp.Code)
		assert.Equal(t, "2", resp.Body.String())
		close(hang)
		wg.Wait()
	})
}

func problemType(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	return answer{status: w.Code, header: w.Header(), body: w.Body.Bytes()}.problem(t).Type
}

// defaultLease is the lease of a call without a deadline or WithLease.
const defaultLease = 30 * time.Second
