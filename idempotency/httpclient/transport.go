package httpclient

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/internal/httpkey"
)

// ErrBodyNotReplayable is the error of [Transport] for a request with a
// body and without GetBody, which it could not send again. Nothing was
// sent.
var ErrBodyNotReplayable = errors.New("httpclient: Transport: the request has a body but no GetBody, so it cannot be sent again; " +
	"make it with http.NewRequest and a *bytes.Buffer, *bytes.Reader or *strings.Reader body, or set GetBody")

// Transport is an [http.RoundTripper] that sends POST and PATCH requests
// with an idempotency key. It sends them again with the same key when the
// answer was lost or says to try again later. The zero value is ready to
// use, with the defaults. A Transport is safe for concurrent use. Its
// fields must not change while it is used.
type Transport struct {
	// Base sends each attempt. Default http.DefaultTransport.
	Base http.RoundTripper
	// Methods are the methods whose requests get a key and are retried,
	// matched without regard to case. Default POST and PATCH.
	Methods []string
	// Header is the request header that carries the key. Default
	// Idempotency-Key, as the IETF draft and Stripe name it.
	Header string

	// MaxAttempts is how many times a request is sent at most, the first
	// time included. Default 5. 1 never retries.
	MaxAttempts int
	// MaxElapsed is how long after the first attempt the last may start.
	// Default one minute, or half the KeyWindow if that is shorter.
	// It must be at most half the KeyWindow.
	MaxElapsed time.Duration
	// KeyWindow is how long the server remembers a key. Default
	// 24 hours (httpapi.DefaultExpiry), the window of the servers of
	// package httpapi.
	KeyWindow time.Duration
	// BaseDelay is the backoff before the first retry, doubled for each
	// retry after it. Default 100 milliseconds.
	BaseDelay time.Duration
	// MaxDelay caps the backoff. Default 5 seconds. It does not cap
	// a Retry-After. An answer that asks for more time than the budget has
	// left is final.
	MaxDelay time.Duration
}

// policy is a Transport's resolved settings.
type policy struct {
	base                    http.RoundTripper
	header                  string
	attempts                int
	elapsed, first, ceiling time.Duration
}

// resolve checks the fields and fills in the defaults.
func (t *Transport) resolve() (policy, error) {
	p := policy{
		base:     cmp.Or[http.RoundTripper](t.Base, http.DefaultTransport),
		header:   cmp.Or(t.Header, httpkey.Header),
		attempts: cmp.Or(t.MaxAttempts, 5),
		first:    cmp.Or(t.BaseDelay, 100*time.Millisecond),
		ceiling:  cmp.Or(t.MaxDelay, 5*time.Second),
	}
	window := cmp.Or(t.KeyWindow, httpkey.Expiry)
	p.elapsed = cmp.Or(t.MaxElapsed, min(time.Minute, window/2))
	var problems []string
	switch {
	case !httpkey.IsToken(p.header):
		problems = append(problems, fmt.Sprintf("Header %q is not a valid header name", p.header))
	case p.attempts < 1:
		problems = append(problems, fmt.Sprintf("MaxAttempts %d is not positive", p.attempts))
	case window <= 0 || p.elapsed <= 0 || p.first <= 0 || p.ceiling <= 0:
		problems = append(problems, "KeyWindow, MaxElapsed, BaseDelay and MaxDelay must be positive")
	case p.elapsed > window/2:
		problems = append(problems, fmt.Sprintf("MaxElapsed %v is more than half the KeyWindow %v: a late retry could reach the server after it forgot the key, "+
			"and run the request a second time", p.elapsed, window))
	case p.first > p.ceiling:
		problems = append(problems, fmt.Sprintf("BaseDelay %v is more than MaxDelay %v", p.first, p.ceiling))
	}
	for _, m := range t.Methods {
		if !httpkey.IsToken(m) {
			problems = append(problems, fmt.Sprintf("Methods: %q is not a valid method", m))
		}
	}
	if len(problems) > 0 {
		return policy{}, errors.New("httpclient: Transport: " + strings.Join(problems, "; "))
	}
	return p, nil
}

// keyed reports whether requests with method get a key.
func (t *Transport) keyed(method string) bool {
	if t.Methods == nil {
		return strings.EqualFold(method, http.MethodPost) || strings.EqualFold(method, http.MethodPatch)
	}
	return slices.ContainsFunc(t.Methods, func(m string) bool { return strings.EqualFold(m, method) })
}

type attemptKey struct{}

// Replayed reports whether resp is the stored answer to an earlier request
// with the same key (Idempotent-Replayed: true). A stored answer is not
// the answer of a run of this request.
func Replayed(resp *http.Response) bool {
	return resp != nil && resp.Header.Get(httpkey.HeaderReplayed) == "true"
}

// Attempts returns how many attempts of [Transport] resp is the answer to.
// It is 1 for the first attempt's answer, and 0 when the request did not
// go through a Transport that retries it.
func Attempts(resp *http.Response) int {
	if resp == nil || resp.Request == nil {
		return 0
	}
	n, _ := resp.Request.Context().Value(attemptKey{}).(int)
	return n
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.keyed(req.Method) {
		return cmp.Or[http.RoundTripper](t.Base, http.DefaultTransport).RoundTrip(req)
	}
	p, err := t.resolve()
	if err == nil && req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		err = ErrBodyNotReplayable
	}
	var key string
	if err == nil && len(req.Header.Values(p.header)) == 0 {
		key, err = keyFor(req.Context())
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // as a RoundTripper must, even on errors
		}
		return nil, err
	}

	ctx := req.Context()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		try := req.Clone(context.WithValue(ctx, attemptKey{}, attempt))
		if key != "" {
			try.Header.Set(p.header, key)
		}
		if attempt > 1 && req.Body != nil && req.Body != http.NoBody {
			if try.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("httpclient: Transport: the body for attempt %d: %w", attempt, err)
			}
		}
		resp, err := p.base.RoundTrip(try)
		wait, again := p.retry(resp, err, attempt)
		if !again || attempt == p.attempts || ctx.Err() != nil || time.Since(start)+wait > p.elapsed {
			return resp, err
		}
		if resp != nil {
			// Read a little of what is left, so that the connection can be
			// used again, and let the rest go.
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
			resp.Body.Close()
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("httpclient: Transport: waiting to send attempt %d: %w", attempt+1, context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// retry decides whether the answer to an attempt calls for another, and
// after how long.
func (p *policy) retry(resp *http.Response, err error, attempt int) (wait time.Duration, again bool) {
	if err != nil {
		return p.backoff(attempt), !permanent(err)
	}
	switch resp.StatusCode {
	case http.StatusConflict:
		if held(resp) {
			return 0, false // no retry ends a hold: an operator must act
		}
		fallthrough
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
		http.StatusTooManyRequests:
		if d, ok := retryAfter(resp); ok {
			return d, true
		}
		return p.backoff(attempt), true
	}
	return 0, false
}

// backoff returns the wait after attempt: BaseDelay·2^(attempt-1), at most
// MaxDelay, less a random part of up to half of it.
func (p *policy) backoff(attempt int) time.Duration {
	d := p.ceiling
	if shift := attempt - 1; shift < 62 && p.first <= p.ceiling>>shift {
		d = p.first << shift
	}
	return d - mathrand.N(d/2+1)
}

// held reports whether resp is a problem of type key-held: the key is held
// until an operator releases it. It reads the start of the body, and puts
// it back.
func held(resp *http.Response) bool {
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(mediaType), "application/problem+json") || resp.Body == nil {
		return false
	}
	start, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(start), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	var problem struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(start, &problem) == nil && problem.Type == httpkey.ProblemKeyHeld
}

// retryAfter reads the Retry-After of resp: a number of seconds, or an
// HTTP date, counted from the response's Date when it has one (the
// server's clock), else from now.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(1<<62)/int64(time.Second))) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	now := time.Now()
	if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		now = date
	}
	return max(at.Sub(now), 0), true
}

// permanent reports whether err, from Base, is one that another attempt
// cannot change: the server's certificate does not verify. Other errors of
// the connection (refused, reset, closed before the answer, timed out)
// may pass.
func permanent(err error) bool {
	var (
		verification *tls.CertificateVerificationError
		unknownCA    x509.UnknownAuthorityError
		hostname     x509.HostnameError
		invalid      x509.CertificateInvalidError
	)
	return errors.As(err, &verification) || errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid)
}
