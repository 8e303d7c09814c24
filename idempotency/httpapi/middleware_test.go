package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// serve starts a server on 127.0.0.1 that serves h behind Middleware over
// store, and returns its URL.
func serve(t *testing.T, store persistence.Store, h http.Handler, opts ...any) string {
	t.Helper()
	mw, err := httpapi.Middleware(store, as[idempotency.MiddlewareOption](append([]any{idempotency.WithLogger(discard())}, opts...))...)
	require.NoError(t, err)
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runs counts the runs of a handler.
type runs struct{ n atomic.Int64 }

func (c *runs) count() int { return int(c.n.Load()) }

// handle returns a handler that counts its runs and then calls h with the
// run's number.
func (c *runs) handle(h func(w http.ResponseWriter, r *http.Request, run int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, int(c.n.Add(1))) })
}

func TestMiddlewareOverHTTP(t *testing.T) {
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	var created runs
	url := serve(t, memory.New(), created.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/"+strconv.Itoa(run))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"method":%q}`, run, r.Method)
	}))

	t.Run("replay", func(t *testing.T) {
		first := do(t, client, "POST", url+"/orders", "application/json", `{"item":"book"}`, "Idempotency-Key", `"order-1"`)
		require.Equal(t, http.StatusCreated, first.status, string(first.body))
		assert.Empty(t, first.header.Values(httpapi.HeaderReplayed))
		replay := do(t, client, "POST", url+"/orders", "application/json", `{"item":"book"}`, "Idempotency-Key", "order-1")
		assert.Equal(t, http.StatusCreated, replay.status)
		assert.Equal(t, "true", replay.header.Get(httpapi.HeaderReplayed))
		assert.Equal(t, first.body, replay.body, "byte-identical")
		assert.Equal(t, first.comparable(), replay.comparable())

		for name, a := range map[string]answer{
			"body":   do(t, client, "POST", url+"/orders", "application/json", `{"item":"pen"}`, "Idempotency-Key", "order-1"),
			"path":   do(t, client, "POST", url+"/refunds", "application/json", `{"item":"book"}`, "Idempotency-Key", "order-1"),
			"query":  do(t, client, "POST", url+"/orders?dry_run=1", "application/json", `{"item":"book"}`, "Idempotency-Key", "order-1"),
			"method": do(t, client, "PATCH", url+"/orders", "application/json", `{"item":"book"}`, "Idempotency-Key", "order-1"),
		} {
			assert.Equal(t, http.StatusUnprocessableEntity, a.status, name)
			assert.Equal(t, httpapi.ProblemKeyReused, a.problem(t).Type, name)
		}
		missing := do(t, client, "POST", url+"/orders", "application/json", `{}`)
		assert.Equal(t, http.StatusBadRequest, missing.status)
		assert.Equal(t, httpapi.ProblemMissingKey, missing.problem(t).Type)
	})

	t.Run("safe methods pass through", func(t *testing.T) {
		before := created.count()
		for _, method := range []string{"GET", "HEAD", "GET"} {
			a := do(t, client, method, url+"/orders", "", "", "Idempotency-Key", "get-1")
			assert.Equal(t, http.StatusCreated, a.status)
			assert.Empty(t, a.header.Values(httpapi.HeaderReplayed))
		}
		assert.Equal(t, before+3, created.count(), "each runs the handler")
	})
}

// The handler gets the body the client sent, whole, as Body and GetBody,
// whether its length was known or not.
func TestMiddlewareBody(t *testing.T) {
	var echo runs
	url := serve(t, memory.New(), echo.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		again, err := r.GetBody()
		require.NoError(t, err)
		copied, err := io.ReadAll(again)
		require.NoError(t, err)
		assert.Equal(t, body, copied)
		sum := sha256.Sum256(body)
		fmt.Fprintf(w, "%d %d %s", run, r.ContentLength, hex.EncodeToString(sum[:]))
	}), httpapi.WithMaxBodySize(1000))
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	post := func(key string, body io.Reader) answer {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", url, body)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return answer{status: resp.StatusCode, header: resp.Header, body: data}
	}
	// io.MultiReader hides the length: the request is chunked.
	chunked := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	full := strings.Repeat("x", 1000)
	sum := sha256.Sum256([]byte(full))

	a := post("k1", strings.NewReader(full))
	assert.Equal(t, "1 1000 "+hex.EncodeToString(sum[:]), string(a.body), "a body of the limit passes")
	a = post("k2", chunked(full))
	assert.Equal(t, "2 -1 "+hex.EncodeToString(sum[:]), string(a.body), "the handler sees the request as it came")
	a = post("k2", chunked(full))
	assert.Equal(t, "true", a.header.Get(httpapi.HeaderReplayed))

	for name, body := range map[string]io.Reader{"known length": strings.NewReader(full + "x"), "chunked": chunked(full + "x")} {
		a := post("k3", body)
		assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, name)
		p := a.problem(t)
		assert.Equal(t, httpapi.ProblemBodyTooLarge, p.Type)
		assert.Equal(t, "The request body is larger than the 1000 bytes this API accepts in a request with the Idempotency-Key header. "+
			"The request was not processed.", p.Detail)
	}
	a = post("k3", strings.NewReader("small"))
	assert.Equal(t, http.StatusOK, a.status, "the key was not used")
	assert.Equal(t, 3, echo.count())
}

// Headers that handlers around the middleware set belong to each
// response: the replay carries its own, and the stored ones of the
// handler.
func TestMiddlewareOuterHeaders(t *testing.T) {
	mw, err := httpapi.Middleware(memory.New())
	require.NoError(t, err)
	var n atomic.Int64
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "set by the handler")
		w.Header().Set("Vary", "Accept") // replaces the outer value
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-"+strconv.FormatInt(n.Add(1), 10))
		w.Header().Set("Vary", "Origin")
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	first := do(t, srv.Client(), "POST", srv.URL, "text/plain", "x", "Idempotency-Key", "k1")
	replay := do(t, srv.Client(), "POST", srv.URL, "text/plain", "x", "Idempotency-Key", "k1")
	assert.Equal(t, "req-1", first.header.Get("X-Request-Id"))
	assert.Equal(t, "req-2", replay.header.Get("X-Request-Id"), "the replay's own")
	assert.Equal(t, "true", replay.header.Get(httpapi.HeaderReplayed))
	assert.Equal(t, "set by the handler", replay.header.Get("X-Handler"))
	assert.Equal(t, "Accept", replay.header.Get("Vary"))
}

func TestMiddlewareTrailers(t *testing.T) {
	var h runs
	url := serve(t, memory.New(), h.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		w.Header().Set("Trailer", "X-Checksum")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "body "+strconv.Itoa(run))
		w.Header().Set("X-Checksum", "sum-"+strconv.Itoa(run))
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "late-"+strconv.Itoa(run))
	}))
	post := func() (*http.Response, string) {
		req, err := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}
	first, firstBody := post()
	replay, replayBody := post()
	assert.Equal(t, "body 1", firstBody)
	assert.Equal(t, firstBody, replayBody)
	assert.Equal(t, "true", replay.Header.Get(httpapi.HeaderReplayed))
	assert.Equal(t, http.Header{"X-Checksum": {"sum-1"}, "X-Undeclared": {"late-1"}}, first.Trailer)
	assert.Equal(t, first.Trailer, replay.Trailer, "the trailers are replayed")
	assert.Equal(t, 1, h.count())
}

// A streamed response, or one written on a hijacked connection, is not
// recorded: the key completes without it, and retries get
// ProblemResponseNotStored, never part of a response.
func TestMiddlewareStreamsAndHijacks(t *testing.T) {
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	var h runs
	url := serve(t, memory.New(), h.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		switch r.URL.Path {
		case "/stream", "/stream-unavailable":
			if r.URL.Path == "/stream-unavailable" {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			io.WriteString(w, "event 1\n")
			require.NoError(t, http.NewResponseController(w).Flush())
			io.WriteString(w, "event 2\n")
		case "/flusher":
			io.WriteString(w, "event 1\n")
			w.(http.Flusher).Flush()
		case "/hijack":
			conn, brw, err := w.(http.Hijacker).Hijack()
			require.NoError(t, err)
			defer conn.Close()
			brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
			require.NoError(t, brw.Flush())
		}
	}))
	for _, tc := range []struct{ path, first, why string }{
		{"/stream", "event 1\nevent 2\n", "was streamed as it was produced"},
		{"/flusher", "event 1\n", "was streamed as it was produced"},
		{"/hijack", "hijacked", "was written on a connection that the API took over"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := h.count()
			first := do(t, client, "POST", url+tc.path, "text/plain", "x", "Idempotency-Key", tc.path)
			assert.Equal(t, http.StatusOK, first.status)
			assert.Equal(t, tc.first, string(first.body), "the first client gets the whole response")
			for range 2 {
				retry := do(t, client, "POST", url+tc.path, "text/plain", "x", "Idempotency-Key", tc.path)
				// A hijacked connection may deliver its response before the
				// handler returns and the key completes: the retry then
				// meets the key in progress, as a client would, and waits.
				for tries := 0; retry.status == http.StatusConflict && tries < 100; tries++ {
					time.Sleep(10 * time.Millisecond)
					retry = do(t, client, "POST", url+tc.path, "text/plain", "x", "Idempotency-Key", tc.path)
				}
				assert.Equal(t, http.StatusInternalServerError, retry.status)
				p := retry.problem(t)
				assert.Equal(t, httpapi.ProblemResponseNotStored, p.Type)
				assert.Contains(t, p.Detail, tc.why)
			}
			assert.Equal(t, before+1, h.count(), "the request executed once")
		})
	}
	t.Run("a streamed status that releases the key", func(t *testing.T) {
		before := h.count()
		for range 2 {
			a := do(t, client, "POST", url+"/stream-unavailable", "text/plain", "x", "Idempotency-Key", "unavailable")
			assert.Equal(t, http.StatusServiceUnavailable, a.status)
		}
		assert.Equal(t, before+2, h.count(), "503 says the request did not execute, streamed or not")
	})
}

// http.ResponseController reaches the server's writer through the
// middleware's.
func TestMiddlewareResponseController(t *testing.T) {
	errs := make(chan error, 1)
	url := serve(t, memory.New(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		errs <- errors.Join(
			rc.SetWriteDeadline(time.Now().Add(time.Minute)),
			rc.SetReadDeadline(time.Now().Add(time.Minute)),
			rc.EnableFullDuplex(),
			rc.SetWriteDeadline(time.Time{}),
		)
		io.WriteString(w, "ok")
	}))
	a := do(t, http.DefaultClient, "POST", url, "text/plain", "x", "Idempotency-Key", "k1")
	require.NoError(t, <-errs)
	assert.Equal(t, "ok", string(a.body))
	replay := do(t, http.DefaultClient, "POST", url, "text/plain", "x", "Idempotency-Key", "k1")
	assert.Equal(t, "true", replay.header.Get(httpapi.HeaderReplayed), "deadlines do not stream")
	assert.Equal(t, "ok", string(replay.body))
}

// A handler that panics releases its key. One that has written part of
// its response has its connection cut, so that its client does not take
// the part for the whole; one that has written nothing is answered 500.
func TestMiddlewarePanics(t *testing.T) {
	// A new connection for each request: net/http sends a request with an
	// Idempotency-Key again by itself when a kept-alive one breaks.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var h runs
	url := serve(t, memory.New(), h.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		if run > 1 {
			io.WriteString(w, "run "+strconv.Itoa(run))
			return
		}
		switch r.URL.Path {
		case "/partial":
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, strings.Repeat("x", 50))
			http.NewResponseController(w).Flush()
			panic("half way")
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/early":
			panic("before writing")
		}
	}))
	for path, cut := range map[string]bool{"/partial": true, "/abort": true, "/early": false} {
		t.Run(path, func(t *testing.T) {
			h.n.Store(0)
			a, err := tryDo(t.Context(), client, "POST", url+path, "text/plain", "x", "Idempotency-Key", path)
			if cut {
				assert.Error(t, err, "the connection is cut")
			} else {
				require.NoError(t, err)
				assert.Equal(t, http.StatusInternalServerError, a.status)
				assert.Equal(t, httpapi.ProblemHandlerFailed, a.problem(t).Type)
			}
			again := do(t, client, "POST", url+path, "text/plain", "x", "Idempotency-Key", path)
			assert.Equal(t, http.StatusOK, again.status, "the key was released")
			assert.Equal(t, "run 2", string(again.body))
		})
	}
	t.Run("WithReturnErrors lets panics go on", func(t *testing.T) {
		var h runs
		mw, err := httpapi.Middleware(memory.New(), httpapi.WithReturnErrors())
		require.NoError(t, err)
		inner := mw(h.handle(func(w http.ResponseWriter, r *http.Request, run int) {
			if run == 1 {
				panic("to the recovery middleware")
			}
			io.WriteString(w, "run "+strconv.Itoa(run))
		}))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					w.WriteHeader(http.StatusTeapot)
					fmt.Fprint(w, "recovered: ", v)
				}
			}()
			inner.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		a := do(t, srv.Client(), "POST", srv.URL, "text/plain", "x", "Idempotency-Key", "k1")
		assert.Equal(t, "recovered: to the recovery middleware", string(a.body))
		a = do(t, srv.Client(), "POST", srv.URL, "text/plain", "x", "Idempotency-Key", "k1")
		assert.Equal(t, "run 2", string(a.body), "released before the panic went on")
	})
}

// A handler that sets headers and then panics before writing is answered
// with the problem alone: the headers the response had before the
// handler ran (those of the handlers around the middleware) and the
// problem's own, none of the failed run's, whose Content-Length would
// cut the answer short and whose Content-Encoding, cookies and Location
// belong to a response that was never sent.
func TestMiddlewarePanicAnswerHasOnlyItsOwnHeaders(t *testing.T) {
	mw, err := httpapi.Middleware(memory.New(), idempotency.WithLogger(discard()))
	require.NoError(t, err)
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Length", "5000")
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Type", "application/octet-stream")
		h.Add("Set-Cookie", "session=failed-run")
		h.Set("Location", "/payments/failed-run")
		h.Set("Trailer", "X-Checksum")
		h.Set("X-Request-Id", "overwritten by the handler")
		panic("before writing")
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-1") // an outer middleware's
		w.Header().Set("Vary", "Origin")
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	a := do(t, srv.Client(), "POST", srv.URL, "application/json", "{}", "Idempotency-Key", "k1")
	assert.Equal(t, http.StatusInternalServerError, a.status)
	assert.Equal(t, httpapi.ProblemHandlerFailed, a.problem(t).Type, "the whole problem arrives: %q", a.body)
	assert.Equal(t, "application/problem+json", a.header.Get("Content-Type"))
	assert.Equal(t, strconv.Itoa(len(a.body)), a.header.Get("Content-Length"))
	for _, name := range []string{"Content-Encoding", "Set-Cookie", "Location", "Trailer"} {
		assert.Empty(t, a.header.Values(name), name)
	}
	assert.Equal(t, "req-1", a.header.Get("X-Request-Id"), "the headers from before the handler ran stay")
	assert.Equal(t, "Origin", a.header.Get("Vary"))
}

// Informational responses go out as they come and are not part of the
// recorded response.
func TestMiddlewareInformational(t *testing.T) {
	var h runs
	url := serve(t, memory.New(), h.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created "+strconv.Itoa(run))
	}))
	first := do(t, http.DefaultClient, "POST", url, "text/plain", "x", "Idempotency-Key", "k1")
	replay := do(t, http.DefaultClient, "POST", url, "text/plain", "x", "Idempotency-Key", "k1")
	assert.Equal(t, http.StatusCreated, first.status)
	assert.Equal(t, http.StatusCreated, replay.status)
	assert.Equal(t, first.body, replay.body)
	assert.Equal(t, first.comparable(), replay.comparable())
}

type userKey struct{}

// WithRequestScope reads what an authentication middleware put in the
// request's context.
func TestWithRequestScope(t *testing.T) {
	errDirectory := errors.New("directory unavailable")
	var h runs
	mw, err := httpapi.Middleware(memory.New(), idempotency.WithLogger(discard()),
		httpapi.WithRequestScope(func(r *http.Request) (string, error) {
			user, _ := r.Context().Value(userKey{}).(string)
			switch user {
			case "":
				return "", fmt.Errorf("%w: not signed in", httpapi.ErrNoScope)
			case "mallory":
				return "", errDirectory
			}
			return user, nil
		}))
	require.NoError(t, err)
	inner := mw(h.handle(func(w http.ResponseWriter, r *http.Request, run int) {
		fmt.Fprintf(w, "run %d for %s", run, r.Context().Value(userKey{}))
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok { // a stand-in for verifying a token
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	as := func(user string) answer {
		return do(t, srv.Client(), "POST", srv.URL, "application/json", `{"amount":1}`, "Idempotency-Key", "shared-key", "Authorization", "Bearer "+user)
	}
	assert.Equal(t, "run 1 for alice", string(as("alice").body))
	assert.Equal(t, "run 2 for bob", string(as("bob").body), "another caller, another record")
	again := as("alice")
	assert.Equal(t, "run 1 for alice", string(again.body))
	assert.Equal(t, "true", again.header.Get(httpapi.HeaderReplayed))

	anonymous := do(t, srv.Client(), "POST", srv.URL, "application/json", `{"amount":1}`, "Idempotency-Key", "shared-key")
	assert.Equal(t, http.StatusBadRequest, anonymous.status)
	assert.Equal(t, httpapi.ProblemMissingScope, anonymous.problem(t).Type)
	failing := as("mallory")
	assert.Equal(t, http.StatusInternalServerError, failing.status)
	assert.Equal(t, httpapi.ProblemHandlerFailed, failing.problem(t).Type)
	assert.Equal(t, 2, h.count())
}

func TestMiddlewareOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opts []any
		want string
	}{
		"nil scope":            {[]any{httpapi.WithRequestScope(nil)}, "httpapi.WithRequestScope: nil function"},
		"both scopes":          {[]any{httpapi.WithScope(httpapi.ScopeHeader("X-Tenant")), httpapi.WithRequestScope(func(*http.Request) (string, error) { return "", nil })}, "give one"},
		"no body":              {[]any{httpapi.WithMaxBodySize(0)}, "httpapi.WithMaxBodySize(0): must be positive"},
		"given twice":          {[]any{httpapi.WithMaxBodySize(1), httpapi.WithMaxBodySize(2)}, "httpapi.WithMaxBodySize given twice"},
		"an adapter's invalid": {[]any{httpapi.WithHeader("")}, `httpapi.WithHeader(""): not a valid header name`},
	} {
		t.Run(name, func(t *testing.T) {
			mw, err := httpapi.Middleware(memory.New(), as[idempotency.MiddlewareOption](tc.opts)...)
			require.Error(t, err)
			assert.Nil(t, mw)
			assert.True(t, strings.HasPrefix(err.Error(), "httpapi: Middleware: "), err.Error())
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := httpapi.Middleware(nil)
	assert.EqualError(t, err, "httpapi: Middleware: nil persistence.Store")

	// An option of Middleware alone, converted by hand to a Lambda
	// adapter's kind, does not convert: the compiler refuses it as it
	// is (see TestMisplacedOptionsDoNotCompile).
	var opt any = httpapi.WithMaxBodySize(10)
	_, ok := opt.(idempotency.HandlerOption)
	assert.False(t, ok)

	mw := idempotency.Must(httpapi.Middleware(memory.New()))
	assert.PanicsWithValue(t, "httpapi: Middleware: nil handler", func() { mw(nil) })

	t.Setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
	next := http.NotFoundHandler()
	mw = idempotency.Must(httpapi.Middleware(memory.New()))
	assert.Equal(t, fmt.Sprint(next), fmt.Sprint(mw(next)), "disabled: the handler itself")
	_, err = httpapi.Middleware(memory.New(), httpapi.WithHeader(""))
	assert.Error(t, err, "options are checked even so")
}

func TestMiddlewareDefaultKeyPrefix(t *testing.T) {
	prefixOf := func(opts ...any) string {
		store := recordingStore()
		h := idempotency.Must(httpapi.Middleware(store, as[idempotency.MiddlewareOption](opts)...))(http.NotFoundHandler())
		req := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "k")
		h.ServeHTTP(httptest.NewRecorder(), req)
		require.Len(t, store.Updates(), 1)
		prefix, _, _ := strings.Cut(store.Updates()[0].Key, "#")
		return prefix
	}
	assert.Equal(t, "http", prefixOf())
	assert.Equal(t, "payments", prefixOf(idempotency.WithKeyPrefix("payments")))
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "orders")
	assert.Equal(t, "orders.http", prefixOf(), "behind Lambda Web Adapter")
}

// The middleware and the Lambda adapters store the same records, under
// the same keys for the same request and prefix: an API that moves from
// Lambda to a server (or back) keeps its keys, and its clients' retries
// across the move get their responses.
func TestRecordsAreSharedWithTheLambdaAdapters(t *testing.T) {
	store := memory.New()
	prefix := idempotency.WithKeyPrefix("payments")
	var lambdaRuns, serverRuns atomic.Int64
	onLambda := idempotency.Must(httpapi.WrapAPIGatewayV2(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
			Body: fmt.Sprintf(`{"on":"lambda","run":%d}`, lambdaRuns.Add(1))}, nil
	}, store, prefix))
	onServer := idempotency.Must(httpapi.Middleware(store, prefix))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"on":"server","run":%d}`, serverRuns.Add(1))
	}))
	viaLambda := func(key string) events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/payments", Body: `{"amount":1}`, Headers: map[string]string{"idempotency-key": key}}
		ev.RequestContext.HTTP.Method = "POST"
		resp, err := onLambda(t.Context(), ev)
		require.NoError(t, err)
		return resp
	}
	viaServer := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		onServer.ServeHTTP(w, req)
		return w
	}

	first := viaLambda("k1")
	replay := viaServer("k1")
	assert.Equal(t, first.Body, replay.Body.String())
	assert.Equal(t, "application/json", replay.Header().Get("Content-Type"))
	assert.Equal(t, "true", replay.Header().Get(httpapi.HeaderReplayed))

	served := viaServer("k2")
	back := viaLambda("k2")
	assert.Equal(t, served.Body.String(), back.Body)
	assert.Equal(t, "true", back.Headers[httpapi.HeaderReplayed])
	assert.Equal(t, []string{"application/json"}, back.MultiValueHeaders["Content-Type"])
	assert.Equal(t, int64(1), lambdaRuns.Load())
	assert.Equal(t, int64(1), serverRuns.Load())
}
