package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// functionURLServer serves h the way a Lambda Function URL does: each
// net/http request becomes an events.LambdaFunctionURLRequest (header names
// in lower case, repeated headers joined with commas, cookies apart, binary
// bodies base64-encoded), both events pass through JSON, and a function
// error becomes a 502.
func functionURLServer(t *testing.T, h httpapi.FunctionURLHandler) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ev := events.LambdaFunctionURLRequest{
			Version:        "2.0",
			RawPath:        r.URL.EscapedPath(),
			RawQueryString: r.URL.RawQuery,
			Headers:        map[string]string{},
		}
		for name, values := range r.Header {
			if name == "Cookie" {
				for _, v := range values {
					ev.Cookies = append(ev.Cookies, strings.Split(v, "; ")...)
				}
				continue
			}
			ev.Headers[strings.ToLower(name)] = strings.Join(values, ",")
		}
		ev.RequestContext.HTTP = events.LambdaFunctionURLRequestContextHTTPDescription{
			Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: r.RemoteAddr, UserAgent: r.UserAgent(),
		}
		if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); utf8.Valid(body) &&
			(strings.HasPrefix(mediaType, "text/") || strings.HasSuffix(mediaType, "json")) {
			ev.Body = string(body)
		} else if len(body) > 0 {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}

		out, err := h(r.Context(), roundTrip(t, ev))
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		out = roundTrip(t, out)
		for name, value := range out.Headers {
			w.Header().Set(name, value)
		}
		for _, c := range out.Cookies {
			w.Header().Add("Set-Cookie", c)
		}
		payload := []byte(out.Body)
		if out.IsBase64Encoded {
			if payload, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
		}
		w.WriteHeader(out.StatusCode)
		_, _ = w.Write(payload)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// answer is a response as the HTTP client read it.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with headers given as name, value pairs.
func do(t *testing.T, client *http.Client, method, url, contentType, body string, headers ...string) answer {
	t.Helper()
	a, err := tryDo(t.Context(), client, method, url, contentType, body, headers...)
	require.NoError(t, err)
	return a
}

// tryDo is do for goroutines other than the test's, which must not stop
// the test.
func tryDo(ctx context.Context, client *http.Client, method, url, contentType, body string, headers ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: data}, err
}

func (a answer) problem(t *testing.T) httpapi.Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", a.header.Get("Content-Type"), "body: %s", a.body)
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	var p httpapi.Problem
	require.NoError(t, dec.Decode(&p))
	assert.Equal(t, a.status, p.Status)
	return p
}

// comparable returns the headers that must be equal between a response and
// its replay: all but Date, which the server sets, and Idempotent-Replayed.
func (a answer) comparable() http.Header {
	h := a.header.Clone()
	h.Del("Date")
	h.Del(httpapi.HeaderReplayed)
	return h
}

func TestFunctionURLOverHTTP(t *testing.T) {
	var (
		mu      sync.Mutex
		runs    int
		hold    = map[string]chan struct{}{} // keys whose request waits until closed
		entered = make(chan struct{}, 1)
	)
	handler := idempotency.Must(httpapi.WrapFunctionURL(func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		mu.Lock()
		runs++
		run := runs
		wait := hold[ev.Headers["idempotency-key"]]
		mu.Unlock()
		if wait != nil {
			entered <- struct{}{}
			<-wait
		}
		switch ev.RawPath {
		case "/panic":
			panic("handler bug")
		case "/thumbnails":
			return events.LambdaFunctionURLResponse{
				StatusCode:      http.StatusCreated,
				Headers:         map[string]string{"Content-Type": "image/png"},
				Body:            base64.StdEncoding.EncodeToString([]byte{0x89, 'P', 'N', 'G', 0, 0xff, byte(run)}),
				IsBase64Encoded: true,
			}, nil
		}
		return events.LambdaFunctionURLResponse{
			StatusCode: http.StatusCreated,
			Headers:    map[string]string{"Content-Type": "application/json", "Location": "/orders/" + strconv.Itoa(run)},
			Cookies:    []string{"last_order=" + strconv.Itoa(run) + "; Path=/; HttpOnly"},
			Body:       `{"id":` + strconv.Itoa(run) + `,"method":"` + ev.RequestContext.HTTP.Method + `"}`,
		}, nil
	}, memory.New(), idempotency.WithLogger(discard())))
	srv := functionURLServer(t, handler)
	client := srv.Client()
	orders := srv.URL + "/orders"

	t.Run("missing key", func(t *testing.T) {
		a := do(t, client, "POST", orders, "application/json", `{"item":"book"}`)
		assert.Equal(t, http.StatusBadRequest, a.status)
		assert.Equal(t, httpapi.ProblemMissingKey, a.problem(t).Type)
	})

	t.Run("malformed key", func(t *testing.T) {
		a := do(t, client, "POST", orders, "application/json", `{}`, "Idempotency-Key", `"unterminated`)
		assert.Equal(t, http.StatusBadRequest, a.status)
		assert.Equal(t, httpapi.Problem{
			Type:   httpapi.ProblemInvalidKey,
			Title:  "Invalid idempotency key",
			Status: http.StatusBadRequest,
			Detail: "The Idempotency-Key header is a quoted string without its closing quote.",
		}, a.problem(t))
	})

	t.Run("two different keys", func(t *testing.T) {
		a := do(t, client, "POST", orders, "application/json", `{}`, "Idempotency-Key", "k1", "Idempotency-Key", "k2")
		assert.Equal(t, http.StatusBadRequest, a.status)
		assert.Equal(t, httpapi.ProblemInvalidKey, a.problem(t).Type)
	})

	t.Run("replay", func(t *testing.T) {
		first := do(t, client, "POST", orders, "application/json", `{"item":"book"}`, "Idempotency-Key", `"order-1"`)
		require.Equal(t, http.StatusCreated, first.status, string(first.body))
		assert.Empty(t, first.header.Values(httpapi.HeaderReplayed))
		assert.NotEmpty(t, first.header.Get("Location"))
		assert.Len(t, first.header.Values("Set-Cookie"), 1)

		replay := do(t, client, "POST", orders, "application/json", `{"item":"book"}`, "idempotency-key", "order-1")
		assert.Equal(t, http.StatusCreated, replay.status)
		assert.Equal(t, "true", replay.header.Get(httpapi.HeaderReplayed))
		assert.Equal(t, first.body, replay.body, "byte-identical")
		assert.Equal(t, first.comparable(), replay.comparable())

		mismatch := do(t, client, "POST", orders, "application/json", `{"item":"pen"}`, "Idempotency-Key", "order-1")
		assert.Equal(t, http.StatusUnprocessableEntity, mismatch.status)
		assert.Equal(t, httpapi.ProblemKeyReused, mismatch.problem(t).Type)
		assert.Empty(t, mismatch.header.Values(httpapi.HeaderReplayed))
	})

	t.Run("binary bodies", func(t *testing.T) {
		image := string([]byte{0x89, 'P', 'N', 'G', 0, 0xff, 0xfe})
		first := do(t, client, "POST", srv.URL+"/thumbnails", "image/png", image, "Idempotency-Key", "thumb-1")
		require.Equal(t, http.StatusCreated, first.status)
		assert.Equal(t, []byte{0x89, 'P', 'N', 'G', 0, 0xff}, first.body[:6])
		replay := do(t, client, "POST", srv.URL+"/thumbnails", "image/png", image, "Idempotency-Key", "thumb-1")
		assert.Equal(t, "true", replay.header.Get(httpapi.HeaderReplayed))
		assert.Equal(t, first.body, replay.body)
		other := do(t, client, "POST", srv.URL+"/thumbnails", "image/png", image+"!", "Idempotency-Key", "thumb-1")
		assert.Equal(t, http.StatusUnprocessableEntity, other.status)
	})

	t.Run("in flight", func(t *testing.T) {
		release := make(chan struct{})
		mu.Lock()
		hold["slow-1"] = release
		mu.Unlock()
		done := make(chan answer)
		go func() {
			a, err := tryDo(t.Context(), client, "POST", orders, "application/json", `{}`, "Idempotency-Key", "slow-1")
			assert.NoError(t, err)
			done <- a
		}()
		<-entered

		dup := do(t, client, "POST", orders, "application/json", `{}`, "Idempotency-Key", "slow-1")
		assert.Equal(t, http.StatusConflict, dup.status)
		seconds, err := strconv.Atoi(dup.header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After is a number of seconds")
		assert.Positive(t, seconds)
		assert.Equal(t, httpapi.ProblemKeyInUse, dup.problem(t).Type)

		close(release)
		first := <-done
		assert.Equal(t, http.StatusCreated, first.status)
		replay := do(t, client, "POST", orders, "application/json", `{}`, "Idempotency-Key", "slow-1")
		assert.Equal(t, first.body, replay.body)
	})

	t.Run("safe methods pass through", func(t *testing.T) {
		a := do(t, client, "GET", orders, "", "", "Idempotency-Key", "get-1")
		b := do(t, client, "GET", orders, "", "", "Idempotency-Key", "get-1")
		assert.Equal(t, http.StatusCreated, b.status)
		assert.NotEqual(t, a.body, b.body, "each GET runs the handler")
		assert.Empty(t, b.header.Values(httpapi.HeaderReplayed))
	})

	t.Run("panic", func(t *testing.T) {
		a := do(t, client, "POST", srv.URL+"/panic", "application/json", `{}`, "Idempotency-Key", "panic-1")
		assert.Equal(t, http.StatusInternalServerError, a.status)
		assert.Equal(t, httpapi.ProblemHandlerFailed, a.problem(t).Type)
		again := do(t, client, "POST", srv.URL+"/panic", "application/json", `{}`, "Idempotency-Key", "panic-1")
		assert.Equal(t, http.StatusInternalServerError, again.status, "the key was released: the handler ran again")
	})
}
