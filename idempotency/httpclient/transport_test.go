package httpclient_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/idempotency/httpclient"
)

// fakeServer is a Base for Transport that answers from a script, without
// a network, so that its tests run in a synctest bubble, where time is
// fake: the waits between attempts are measured exactly.
type fakeServer struct {
	mu       sync.Mutex
	script   []func(*http.Request) (*http.Response, error) // one per attempt; the last repeats
	attempts []attempt
}

// attempt is what the server saw of one attempt.
type attempt struct {
	key  string // the Idempotency-Key header
	body string
	at   time.Time
}

func (s *fakeServer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	s.mu.Lock()
	n := len(s.attempts)
	s.attempts = append(s.attempts, attempt{key: req.Header.Get("Idempotency-Key"), body: string(body), at: time.Now()})
	answer := s.script[min(n, len(s.script)-1)]
	s.mu.Unlock()
	resp, err := answer(req)
	if resp != nil {
		resp.Request = req
	}
	return resp, err
}

func (s *fakeServer) seen() []attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]attempt(nil), s.attempts...)
}

// waits returns the time between the attempts.
func (s *fakeServer) waits() []time.Duration {
	var d []time.Duration
	seen := s.seen()
	for i := 1; i < len(seen); i++ {
		d = append(d, seen[i].at.Sub(seen[i-1].at))
	}
	return d
}

// reply answers with status and the headers given as name, value pairs.
func reply(status int, headers ...string) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) {
		h := http.Header{}
		for i := 0; i < len(headers); i += 2 {
			h.Set(headers[i], headers[i+1])
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(strconv.Itoa(status)))}, nil
	}
}

func fail(err error) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

var errReset = errors.New("read tcp 127.0.0.1:1234->127.0.0.1:80: read: connection reset by peer")

func newPost(t *testing.T, ctx context.Context, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.example/payments", strings.NewReader(body))
	require.NoError(t, err)
	return req
}

var uuidV4 = regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`)

func TestTransportKeys(t *testing.T) {
	send := func(tr *httpclient.Transport, req *http.Request) (attempt, *http.Response) {
		t.Helper()
		s := &fakeServer{script: []func(*http.Request) (*http.Response, error){reply(201)}}
		tr.Base = s
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		require.Len(t, s.seen(), 1)
		return s.seen()[0], resp
	}
	t.Run("a new key for each request", func(t *testing.T) {
		keys := map[string]bool{}
		for _, method := range []string{"POST", "PATCH", "post"} {
			req := newPost(t, t.Context(), `{"amount":1}`)
			req.Method = method
			got, resp := send(&httpclient.Transport{}, req)
			assert.Regexp(t, uuidV4, got.key, "a quoted UUID v4, the draft's form")
			assert.Equal(t, `{"amount":1}`, got.body)
			assert.Equal(t, 1, httpclient.Attempts(resp))
			assert.Empty(t, req.Header.Get("Idempotency-Key"), "the caller's request is left as it was")
			keys[got.key] = true
		}
		assert.Len(t, keys, 3)
	})
	t.Run("other methods pass unchanged", func(t *testing.T) {
		for _, method := range []string{"GET", "PUT", "DELETE", "HEAD"} {
			req := newPost(t, t.Context(), "")
			req.Method = method
			got, resp := send(&httpclient.Transport{}, req)
			assert.Empty(t, got.key)
			assert.Zero(t, httpclient.Attempts(resp), "not retried")
		}
		req := newPost(t, t.Context(), "")
		req.Method = "PUT"
		got, _ := send(&httpclient.Transport{Methods: []string{"put"}}, req)
		assert.Regexp(t, uuidV4, got.key)
	})
	t.Run("the request's own key", func(t *testing.T) {
		req := newPost(t, t.Context(), "")
		req.Header.Set("Idempotency-Key", "order-1")
		got, _ := send(&httpclient.Transport{}, req)
		assert.Equal(t, "order-1", got.key, "as the caller wrote it")
		req = newPost(t, t.Context(), "")
		req.Header.Set("X-Request-Key", "order-1")
		got, _ = send(&httpclient.Transport{Header: "X-Request-Key"}, req)
		assert.Empty(t, got.key, "the configured header only")
	})
	t.Run("WithKey", func(t *testing.T) {
		got, _ := send(&httpclient.Transport{}, newPost(t, httpclient.WithKey(t.Context(), `ord_1 "a\b"`), ""))
		assert.Equal(t, `"ord_1 \"a\\b\""`, got.key)
		for _, bad := range []string{"", strings.Repeat("k", 256), "ключ", "a\nb"} {
			s := &fakeServer{script: []func(*http.Request) (*http.Response, error){reply(201)}}
			body := &closeRecorder{Reader: strings.NewReader("x")}
			req := newPost(t, httpclient.WithKey(t.Context(), bad), "")
			req.Body = body
			_, err := (&httpclient.Transport{Base: s}).RoundTrip(req)
			assert.ErrorContains(t, err, "the key from WithKey", "%q", bad)
			assert.Empty(t, s.seen(), "nothing was sent")
			assert.True(t, body.closed, "the body is closed, as RoundTrip must")
		}
	})
	t.Run("NewKey", func(t *testing.T) {
		seen := map[string]bool{}
		for range 1000 {
			k := httpclient.NewKey()
			require.Regexp(t, uuidV4, `"`+k+`"`)
			seen[k] = true
		}
		assert.Len(t, seen, 1000)
	})
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestTransportRetries(t *testing.T) {
	type script = []func(*http.Request) (*http.Response, error)
	date := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		name   string
		script func() script // made in the bubble, for its clock
		status int           // of the answer returned
		err    bool          // the answer returned is an error
		waits  []time.Duration
	}{
		{"connection reset, then an answer", func() script { return script{fail(errReset), reply(201)} }, 201, false, []time.Duration{-100 * time.Millisecond}},
		{"503, then an answer", func() script { return script{reply(503), reply(201)} }, 201, false, []time.Duration{-100 * time.Millisecond}},
		{"502 and 504", func() script { return script{reply(502), reply(504), reply(200)} }, 200, false, []time.Duration{-100 * time.Millisecond, -200 * time.Millisecond}},
		{"503 with Retry-After", func() script { return script{reply(503, "Retry-After", "3"), reply(201)} }, 201, false, []time.Duration{3 * time.Second}},
		{"409 with Retry-After", func() script { return script{reply(409, "Retry-After", "1"), reply(201)} }, 201, false, []time.Duration{time.Second}},
		{"409 without", func() script { return script{reply(409), reply(201)} }, 201, false, []time.Duration{-100 * time.Millisecond}},
		{"429 with an HTTP date, on the server's clock", func() script {
			// The server's clock is an hour ahead: the date is 10 seconds
			// after the server's Date.
			return script{reply(429, "Retry-After", date(time.Hour+10*time.Second), "Date", date(time.Hour)), reply(201)}
		}, 201, false, []time.Duration{10 * time.Second}},
		{"a Retry-After in the past", func() script { return script{reply(429, "Retry-After", date(-time.Minute)), reply(201)} }, 201, false, []time.Duration{0}},
		{"always 503: MaxAttempts", func() script { return script{reply(503)} }, 503, false,
			[]time.Duration{-100 * time.Millisecond, -200 * time.Millisecond, -400 * time.Millisecond, -800 * time.Millisecond}},
		{"always reset: MaxAttempts", func() script { return script{fail(errReset)} }, 0, true,
			[]time.Duration{-100 * time.Millisecond, -200 * time.Millisecond, -400 * time.Millisecond, -800 * time.Millisecond}},
		{"Retry-After beyond the budget", func() script { return script{reply(503, "Retry-After", "40")} }, 503, false, []time.Duration{40 * time.Second}},
		{"a certificate that does not verify", func() script { return script{fail(x509.UnknownAuthorityError{})} }, 0, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &fakeServer{script: tc.script()}
				resp, err := (&httpclient.Transport{Base: s}).RoundTrip(newPost(t, t.Context(), `{"amount":1}`))
				seen := s.seen()
				if tc.err {
					require.Error(t, err)
				} else {
					require.NoError(t, err)
					assert.Equal(t, tc.status, resp.StatusCode)
					body, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					assert.Equal(t, strconv.Itoa(tc.status), string(body), "the last answer's body, unread")
					assert.Equal(t, len(seen), httpclient.Attempts(resp))
				}
				require.Len(t, seen, len(tc.waits)+1)
				for _, a := range seen {
					assert.Equal(t, seen[0].key, a.key, "every attempt carries the same key")
					assert.Equal(t, `{"amount":1}`, a.body, "and the same body")
				}
				for i, got := range s.waits() {
					want := tc.waits[i]
					if want < 0 { // a backoff of -want, less up to half of it
						assert.GreaterOrEqual(t, got, -want/2, "wait %d", i+1)
						assert.LessOrEqual(t, got, -want, "wait %d", i+1)
						continue
					}
					assert.Equal(t, want, got, "wait %d", i+1)
				}
			})
		})
	}
}

func TestTransportFinalAnswers(t *testing.T) {
	for _, status := range []int{200, 201, 400, 401, 403, 404, 422, 500} {
		s := &fakeServer{script: []func(*http.Request) (*http.Response, error){reply(status, "Retry-After", "1")}}
		resp, err := (&httpclient.Transport{Base: s}).RoundTrip(newPost(t, t.Context(), "{}"))
		require.NoError(t, err)
		assert.Equal(t, status, resp.StatusCode)
		assert.Len(t, s.seen(), 1, "%d is final", status)
	}
}

func TestTransportBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeServer{script: []func(*http.Request) (*http.Response, error){fail(errReset)}}
		tr := &httpclient.Transport{Base: s, MaxAttempts: 100, BaseDelay: time.Second, MaxDelay: 4 * time.Second, MaxElapsed: 20 * time.Second}
		start := time.Now()
		_, err := tr.RoundTrip(newPost(t, t.Context(), ""))
		require.ErrorIs(t, err, errReset)
		last := s.seen()[len(s.seen())-1].at
		assert.LessOrEqual(t, last.Sub(start), 20*time.Second, "no attempt starts after MaxElapsed")
		assert.Greater(t, last.Sub(start), 20*time.Second-4*time.Second, "the budget was used")
		for i, w := range s.waits() {
			assert.LessOrEqual(t, w, 4*time.Second, "wait %d: MaxDelay caps the backoff", i+1)
		}
	})
	for name, tc := range map[string]struct {
		tr   httpclient.Transport
		want string
	}{
		"half the window":        {httpclient.Transport{MaxElapsed: 12*time.Hour + time.Second}, "MaxElapsed 12h0m1s is more than half the KeyWindow 24h0m0s"},
		"half a short window":    {httpclient.Transport{KeyWindow: time.Minute, MaxElapsed: 31 * time.Second}, "more than half the KeyWindow 1m0s"},
		"negative attempts":      {httpclient.Transport{MaxAttempts: -1}, "MaxAttempts -1 is not positive"},
		"negative window":        {httpclient.Transport{KeyWindow: -time.Hour}, "must be positive"},
		"base above max":         {httpclient.Transport{BaseDelay: time.Minute}, "BaseDelay 1m0s is more than MaxDelay 5s"},
		"invalid method":         {httpclient.Transport{Methods: []string{"POST", "P ST"}}, `"P ST" is not a valid method`},
		"invalid header":         {httpclient.Transport{Header: "Idempotency Key"}, "not a valid header name"},
		"not replayable body":    {httpclient.Transport{}, "cannot be sent again"},
		"MaxElapsed of a window": {httpclient.Transport{KeyWindow: 10 * time.Minute, MaxElapsed: 10 * time.Minute}, "more than half"},
	} {
		t.Run(name, func(t *testing.T) {
			s := &fakeServer{script: []func(*http.Request) (*http.Response, error){reply(201)}}
			tc.tr.Base = s
			body := &closeRecorder{Reader: strings.NewReader("{}")}
			req := newPost(t, t.Context(), "")
			req.Body, req.GetBody = body, nil
			if name != "not replayable body" {
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("{}")), nil }
			}
			_, err := tc.tr.RoundTrip(req)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "httpclient: Transport: "), err.Error())
			assert.Empty(t, s.seen(), "nothing was sent")
			assert.True(t, body.closed)
			if name == "not replayable body" {
				assert.ErrorIs(t, err, httpclient.ErrBodyNotReplayable)
			}
		})
	}
	t.Run("a short window shortens the default budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &fakeServer{script: []func(*http.Request) (*http.Response, error){reply(503, "Retry-After", "20")}}
			start := time.Now()
			resp, err := (&httpclient.Transport{Base: s, KeyWindow: time.Minute}).RoundTrip(newPost(t, t.Context(), ""))
			require.NoError(t, err)
			assert.Equal(t, 2, httpclient.Attempts(resp), "a third attempt would start 40s in, past half the window")
			assert.Equal(t, 20*time.Second, time.Since(start))
		})
	})
}

// The request's context ends the waits between attempts, and the
// attempts.
func TestTransportHonoursTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeServer{script: []func(*http.Request) (*http.Response, error){reply(503, "Retry-After", "30")}}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		_, err := (&httpclient.Transport{Base: s}).RoundTrip(newPost(t, ctx, ""))
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, time.Second, time.Since(start), "the wait ends with the context")
		assert.Len(t, s.seen(), 1)

		ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s = &fakeServer{script: []func(*http.Request) (*http.Response, error){func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done() // a server that never answers
			return nil, req.Context().Err()
		}}}
		_, err = (&httpclient.Transport{Base: s}).RoundTrip(newPost(t, ctx, ""))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Len(t, s.seen(), 1, "no attempt after the deadline")
	})
}

func TestReplayedAndAttempts(t *testing.T) {
	assert.False(t, httpclient.Replayed(nil))
	assert.False(t, httpclient.Replayed(&http.Response{Header: http.Header{}}))
	assert.True(t, httpclient.Replayed(&http.Response{Header: http.Header{"Idempotent-Replayed": {"true"}}}))
	assert.Zero(t, httpclient.Attempts(nil))
	assert.Zero(t, httpclient.Attempts(&http.Response{}))
	assert.Zero(t, httpclient.Attempts(&http.Response{Request: newPost(t, t.Context(), "")}))
}

// A 409 whose problem says the key is held for an operator is final: no
// retry ends a hold. Its body reaches the caller whole. Other 409s are
// retried.
func TestTransportDoesNotRetryAHeldKey(t *testing.T) {
	problem := func(typ string) func(*http.Request) (*http.Response, error) {
		return func(*http.Request) (*http.Response, error) {
			h := http.Header{"Content-Type": {"application/problem+json; charset=utf-8"}}
			body := `{"type":"` + typ + `","title":"t","status":409}`
			return &http.Response{StatusCode: 409, Header: h, Body: io.NopCloser(strings.NewReader(body))}, nil
		}
	}
	synctest.Test(t, func(t *testing.T) {
		s := &fakeServer{script: []func(*http.Request) (*http.Response, error){problem(httpapi.ProblemKeyHeld)}}
		resp, err := (&httpclient.Transport{Base: s}).RoundTrip(newPost(t, t.Context(), "{}"))
		require.NoError(t, err)
		assert.Equal(t, 409, resp.StatusCode)
		assert.Len(t, s.seen(), 1, "a held key is final")
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.JSONEq(t, `{"type":"`+httpapi.ProblemKeyHeld+`","title":"t","status":409}`, string(body))

		s = &fakeServer{script: []func(*http.Request) (*http.Response, error){problem(httpapi.ProblemKeyInUse), reply(201)}}
		resp, err = (&httpclient.Transport{Base: s}).RoundTrip(newPost(t, t.Context(), "{}"))
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode)
		assert.Len(t, s.seen(), 2, "a key in use is retried")
	})
}
