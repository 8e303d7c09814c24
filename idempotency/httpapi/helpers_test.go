package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// The tests describe requests and responses once, as an HTTP client and a
// handler see them, and run them through every event type: each eventType
// builds its events from a sample event of aws-lambda-go and reads its
// responses the way the AWS service in front of the function does.

// header is one header line.
type header struct{ name, value string }

// httpReq is a request as the client sends it.
type httpReq struct {
	method  string
	path    string
	headers []header
	query   []header // query string parameters, in order, as name and value
	body    string
	base64  bool // the event carries the body base64-encoded
	// caller, when set, is the identity that the service in front of the
	// function authenticated.
	caller *caller
}

// caller is an authenticated identity: for REST APIs the claims of a
// Cognito user pool authorizer, for HTTP APIs those of a JWT authorizer,
// and for Function URLs an IAM principal, with issuer as its account ID.
// ALB targets carry none.
type caller struct{ issuer, subject string }

func (c *caller) claims() map[string]string {
	return map[string]string{"iss": c.issuer, "sub": c.subject, "scope": "payments"}
}

// httpResp is a response as the client receives it, or as a handler
// returns it.
type httpResp struct {
	status      int
	description string // ALB's statusDescription
	headers     http.Header
	cookies     []string
	body        string
	base64      bool
}

// testHandler is a handler written once for every event type.
type testHandler func(ctx context.Context, req httpReq) (httpResp, error)

// eventType runs httpReqs through one adapter.
type eventType struct {
	name string
	// multiValue is set when the event carries every header line
	// separately; otherwise repeated lines are joined (HTTP APIs, Function
	// URLs) or the last one wins (ALB without multi-value headers).
	multiValue bool
	// joined is set when repeated request header lines arrive joined with
	// commas.
	joined bool
	// handler is set for Middleware, whose http.Handler returns no Go
	// errors.
	handler bool
	wrap    func(t testing.TB, h testHandler, store persistence.Store, opts ...any) func(context.Context, httpReq) (httpResp, error)
}

var eventTypes = []eventType{
	{name: "REST", multiValue: true, wrap: wrapREST},
	{name: "HTTPv2", joined: true, wrap: wrapV2},
	{name: "FunctionURL", joined: true, wrap: wrapFunctionURL},
	{name: "ALB", wrap: wrapALB(false)},
	{name: "ALBMultiValue", multiValue: true, wrap: wrapALB(true)},
	{name: "NetHTTP", multiValue: true, handler: true, wrap: wrapNetHTTP},
}

// skipForHandlers skips a test of what only a handler with Go errors can
// do (an error, a permanent error) for Middleware.
func skipForHandlers(t *testing.T, et eventType) {
	t.Helper()
	if et.handler {
		t.Skip("an http.Handler returns no Go errors: it answers with a response, which the other tests cover")
	}
}

// forEachEventType runs test once per event type.
func forEachEventType(t *testing.T, test func(t *testing.T, et eventType)) {
	for _, et := range eventTypes {
		t.Run(et.name, func(t *testing.T) { test(t, et) })
	}
}

// loadEvent decodes a sample event from testdata/events.
func loadEvent[T any](t testing.TB, name string) T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "events", name))
	require.NoError(t, err)
	var ev T
	require.NoError(t, json.Unmarshal(data, &ev))
	return ev
}

// roundTrip passes v through JSON as the Lambda runtime does, so that
// nothing the adapter returns survives only as a Go value.
func roundTrip[T any](t testing.TB, v T) T {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

func singleHeaders(hs []header) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.name] = h.value // the last line wins
	}
	return m
}

func joinedHeaders(hs []header) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		if v, ok := m[h.name]; ok {
			m[h.name] = v + "," + h.value
		} else {
			m[h.name] = h.value
		}
	}
	return m
}

func multiHeaders(hs []header) map[string][]string {
	m := map[string][]string{}
	for _, h := range hs {
		m[h.name] = append(m[h.name], h.value)
	}
	return m
}

// rawQuery returns the query string of HTTP APIs and Function URLs.
func rawQuery(params []header) string {
	parts := make([]string, len(params))
	for i, p := range params {
		parts[i] = url.QueryEscape(p.name) + "=" + url.QueryEscape(p.value)
	}
	return strings.Join(parts, "&")
}

func headerList(single map[string]string, multi map[string][]string) []header {
	var hs []header
	for k, vs := range multi {
		for _, v := range vs {
			hs = append(hs, header{k, v})
		}
	}
	for k, v := range single {
		if _, ok := multi[k]; !ok {
			hs = append(hs, header{k, v})
		}
	}
	return hs
}

// mergeHeaders reads response headers as API Gateway does: a name in
// multi takes its values from there, others from single.
func mergeHeaders(single map[string]string, multi map[string][]string) http.Header {
	h := http.Header{}
	for k, vs := range multi {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for k, v := range single {
		if _, ok := multi[k]; !ok {
			h.Add(k, v)
		}
	}
	return h
}

// splitHeaders writes handler response headers: one value to single, more
// to multi.
func splitHeaders(h http.Header) (map[string]string, map[string][]string) {
	single := map[string]string{}
	var multi map[string][]string
	for k, vs := range h {
		if len(vs) == 1 {
			single[k] = vs[0]
			continue
		}
		if multi == nil {
			multi = map[string][]string{}
		}
		multi[k] = vs
	}
	return single, multi
}

func flatHeaders(h http.Header) map[string]string {
	m := map[string]string{}
	for k, vs := range h {
		m[k] = strings.Join(vs, ",")
	}
	return m
}

func wrapREST(t testing.TB, h testHandler, store persistence.Store, opts ...any) func(context.Context, httpReq) (httpResp, error) {
	base := loadEvent[events.APIGatewayProxyRequest](t, "apigw-request.json")
	wrapped, err := httpapi.WrapAPIGateway(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		resp, err := h(ctx, httpReq{method: ev.HTTPMethod, path: ev.Path, headers: headerList(ev.Headers, ev.MultiValueHeaders), body: ev.Body, base64: ev.IsBase64Encoded})
		single, multi := splitHeaders(resp.headers)
		if len(resp.cookies) > 0 {
			if multi == nil {
				multi = map[string][]string{}
			}
			multi["Set-Cookie"] = resp.cookies
		}
		return events.APIGatewayProxyResponse{StatusCode: resp.status, Headers: single, MultiValueHeaders: multi, Body: resp.body, IsBase64Encoded: resp.base64}, err
	}, store, as[idempotency.HandlerOption](opts)...)
	require.NoError(t, err)
	return func(ctx context.Context, req httpReq) (httpResp, error) {
		ev := base
		ev.HTTPMethod, ev.Path, ev.Body, ev.IsBase64Encoded = req.method, req.path, req.body, req.base64
		ev.Headers, ev.MultiValueHeaders = singleHeaders(req.headers), multiHeaders(req.headers)
		ev.QueryStringParameters, ev.MultiValueQueryStringParameters = singleHeaders(req.query), multiHeaders(req.query)
		if req.caller != nil {
			claims := map[string]any{}
			for k, v := range req.caller.claims() {
				claims[k] = v
			}
			ev.RequestContext.Authorizer = map[string]any{"claims": claims}
		}
		out, err := wrapped(ctx, roundTrip(t, ev))
		out = roundTrip(t, out)
		h := mergeHeaders(out.Headers, out.MultiValueHeaders)
		cookies := h.Values("Set-Cookie")
		h.Del("Set-Cookie")
		return httpResp{status: out.StatusCode, headers: h, cookies: cookies, body: out.Body, base64: out.IsBase64Encoded}, err
	}
}

func wrapV2(t testing.TB, h testHandler, store persistence.Store, opts ...any) func(context.Context, httpReq) (httpResp, error) {
	base := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-no-authorizer.json")
	jwt := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json").RequestContext.Authorizer
	wrapped, err := httpapi.WrapAPIGatewayV2(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		resp, err := h(ctx, httpReq{method: ev.RequestContext.HTTP.Method, path: ev.RawPath, headers: headerList(ev.Headers, nil), body: ev.Body, base64: ev.IsBase64Encoded})
		return events.APIGatewayV2HTTPResponse{StatusCode: resp.status, Headers: flatHeaders(resp.headers), Cookies: resp.cookies, Body: resp.body, IsBase64Encoded: resp.base64}, err
	}, store, as[idempotency.HandlerOption](opts)...)
	require.NoError(t, err)
	return func(ctx context.Context, req httpReq) (httpResp, error) {
		ev := base
		ev.RequestContext.HTTP.Method, ev.RawPath, ev.RequestContext.HTTP.Path = req.method, req.path, req.path
		ev.Body, ev.IsBase64Encoded = req.body, req.base64
		ev.Headers = joinedHeaders(req.headers)
		ev.RawQueryString, ev.QueryStringParameters = rawQuery(req.query), joinedHeaders(req.query)
		if req.caller != nil {
			auth := *jwt
			jwtAuth := *auth.JWT
			jwtAuth.Claims = req.caller.claims()
			auth.JWT = &jwtAuth
			ev.RequestContext.Authorizer = &auth
		}
		out, err := wrapped(ctx, roundTrip(t, ev))
		out = roundTrip(t, out)
		return httpResp{status: out.StatusCode, headers: mergeHeaders(out.Headers, nil), cookies: out.Cookies, body: out.Body, base64: out.IsBase64Encoded}, err
	}
}

func wrapFunctionURL(t testing.TB, h testHandler, store persistence.Store, opts ...any) func(context.Context, httpReq) (httpResp, error) {
	base := loadEvent[events.LambdaFunctionURLRequest](t, "lambda-urls-request.json")
	iam := *base.RequestContext.Authorizer.IAM
	base.RequestContext.Authorizer = nil
	wrapped, err := httpapi.WrapFunctionURL(func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		resp, err := h(ctx, httpReq{method: ev.RequestContext.HTTP.Method, path: ev.RawPath, headers: headerList(ev.Headers, nil), body: ev.Body, base64: ev.IsBase64Encoded})
		return events.LambdaFunctionURLResponse{StatusCode: resp.status, Headers: flatHeaders(resp.headers), Cookies: resp.cookies, Body: resp.body, IsBase64Encoded: resp.base64}, err
	}, store, as[idempotency.HandlerOption](opts)...)
	require.NoError(t, err)
	return func(ctx context.Context, req httpReq) (httpResp, error) {
		ev := base
		ev.RequestContext.HTTP.Method, ev.RawPath, ev.RequestContext.HTTP.Path = req.method, req.path, req.path
		ev.Body, ev.IsBase64Encoded = req.body, req.base64
		ev.Headers = joinedHeaders(req.headers)
		ev.RawQueryString, ev.QueryStringParameters = rawQuery(req.query), joinedHeaders(req.query)
		if req.caller != nil {
			principal := iam
			principal.AccountID = req.caller.issuer
			principal.UserARN = "arn:aws:iam::" + req.caller.issuer + ":user/" + req.caller.subject
			ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &principal}
		}
		out, err := wrapped(ctx, roundTrip(t, ev))
		out = roundTrip(t, out)
		return httpResp{status: out.StatusCode, headers: mergeHeaders(out.Headers, nil), cookies: out.Cookies, body: out.Body, base64: out.IsBase64Encoded}, err
	}
}

// wrapALB reads responses as the load balancer does: with multi-value
// headers on, only multiValueHeaders; otherwise only headers.
func wrapALB(multiValue bool) func(t testing.TB, h testHandler, store persistence.Store, opts ...any) func(context.Context, httpReq) (httpResp, error) {
	return func(t testing.TB, h testHandler, store persistence.Store, opts ...any) func(context.Context, httpReq) (httpResp, error) {
		sample := "alb-lambda-target-request-headers-only.json"
		if multiValue {
			sample = "alb-lambda-target-request-multivalue-headers.json"
		}
		base := loadEvent[events.ALBTargetGroupRequest](t, sample)
		wrapped, err := httpapi.WrapALB(func(ctx context.Context, ev events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			resp, err := h(ctx, httpReq{method: ev.HTTPMethod, path: ev.Path, headers: headerList(ev.Headers, ev.MultiValueHeaders), body: ev.Body, base64: ev.IsBase64Encoded})
			out := events.ALBTargetGroupResponse{StatusCode: resp.status, StatusDescription: fmt.Sprintf("%d %s", resp.status, http.StatusText(resp.status)),
				Body: resp.body, IsBase64Encoded: resp.base64}
			if multiValue {
				out.MultiValueHeaders = map[string][]string(resp.headers.Clone())
				if len(resp.cookies) > 0 {
					out.MultiValueHeaders["Set-Cookie"] = resp.cookies
				}
			} else {
				out.Headers = flatHeaders(resp.headers)
				if len(resp.cookies) > 0 {
					out.Headers["Set-Cookie"] = resp.cookies[0]
				}
			}
			return out, err
		}, store, as[idempotency.HandlerOption](opts)...)
		require.NoError(t, err)
		return func(ctx context.Context, req httpReq) (httpResp, error) {
			ev := base
			ev.HTTPMethod, ev.Path, ev.Body, ev.IsBase64Encoded = req.method, req.path, req.body, req.base64
			if multiValue {
				ev.Headers, ev.MultiValueHeaders = nil, multiHeaders(req.headers)
				ev.QueryStringParameters, ev.MultiValueQueryStringParameters = nil, multiHeaders(req.query)
			} else {
				ev.Headers, ev.MultiValueHeaders = singleHeaders(req.headers), nil
				ev.QueryStringParameters, ev.MultiValueQueryStringParameters = singleHeaders(req.query), nil
			}
			out, err := wrapped(ctx, roundTrip(t, ev))
			out = roundTrip(t, out)
			var h http.Header
			if multiValue {
				h = mergeHeaders(nil, out.MultiValueHeaders)
			} else {
				h = mergeHeaders(out.Headers, nil)
			}
			cookies := h.Values("Set-Cookie")
			h.Del("Set-Cookie")
			return httpResp{status: out.StatusCode, description: out.StatusDescription, headers: h, cookies: cookies, body: out.Body, base64: out.IsBase64Encoded}, err
		}
	}
}

// wrapNetHTTP serves h behind Middleware, in the process: each httpReq
// becomes an *http.Request (a body the event would have carried
// base64-encoded is sent as the bytes it stands for), and the response is
// read as a client reads it (a body that is not UTF-8 comes back
// base64-encoded, as a Function URL would return it).
func wrapNetHTTP(t testing.TB, h testHandler, store persistence.Store, opts ...any) func(context.Context, httpReq) (httpResp, error) {
	mw, err := httpapi.Middleware(store, as[idempotency.MiddlewareOption](opts)...)
	require.NoError(t, err)
	handler := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		resp, err := h(r.Context(), httpReq{method: r.Method, path: r.URL.Path, headers: headerList(nil, r.Header), body: string(body)})
		require.NoError(t, err, "an http.Handler has no error to return")
		for k, vs := range resp.headers {
			w.Header()[k] = vs
		}
		for _, c := range resp.cookies {
			w.Header().Add("Set-Cookie", c)
		}
		payload := []byte(resp.body)
		if resp.base64 {
			payload, err = base64.StdEncoding.DecodeString(resp.body)
			require.NoError(t, err)
		}
		w.WriteHeader(resp.status)
		_, _ = w.Write(payload)
	}))
	return func(ctx context.Context, req httpReq) (httpResp, error) {
		body := []byte(req.body)
		if req.base64 {
			if decoded, err := base64.StdEncoding.DecodeString(req.body); err == nil {
				body = decoded
			}
		}
		target := req.path
		if len(req.query) > 0 {
			target += "?" + rawQuery(req.query)
		}
		r := httptest.NewRequestWithContext(ctx, req.method, target, bytes.NewReader(body))
		for _, h := range req.headers {
			r.Header.Add(h.name, h.value)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		res := w.Result()
		data, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		if res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotModified {
			data = nil // recorded by httptest, but never sent
		}
		out := httpResp{status: res.StatusCode, headers: res.Header, cookies: res.Header.Values("Set-Cookie"), body: string(data)}
		out.headers.Del("Set-Cookie")
		if !utf8.Valid(data) {
			out.body, out.base64 = base64.StdEncoding.EncodeToString(data), true
		}
		return out, nil
	}
}

// app is a handler that counts its runs; respond, when set, chooses the
// response of each run (from 1).
type app struct {
	mu      sync.Mutex
	runs    int
	keys    []string
	respond func(run int, req httpReq) (httpResp, error)
}

func (a *app) handle(ctx context.Context, req httpReq) (httpResp, error) {
	a.mu.Lock()
	a.runs++
	run := a.runs
	key, _ := idempotency.KeyFromContext(ctx)
	a.keys = append(a.keys, key)
	respond := a.respond
	a.mu.Unlock()
	if respond != nil {
		return respond(run, req)
	}
	return created(run), nil
}

func (a *app) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs
}

// created is the default response of run.
func created(run int) httpResp {
	id := fmt.Sprintf("ord_%d", run)
	return httpResp{
		status: http.StatusCreated,
		headers: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/orders/" + id},
		},
		cookies: []string{"seen=" + id + "; Path=/; HttpOnly"},
		body:    `{"id":"` + id + `","note":"<a & b>"}`,
	}
}

func status(code int, body string) httpResp {
	return httpResp{status: code, headers: http.Header{"Content-Type": {"text/plain"}}, body: body}
}

// post returns a POST request to /orders with key (none if empty).
func post(key, body string, more ...header) httpReq {
	req := httpReq{method: "POST", path: "/orders", body: body, headers: []header{{"Content-Type", "application/json"}}}
	if key != "" {
		req.headers = append(req.headers, header{"Idempotency-Key", key})
	}
	req.headers = append(req.headers, more...)
	return req
}

// problemOf decodes the problem body of resp, checking its media type and
// that its status matches the response's.
func problemOf(t testing.TB, resp httpResp) httpapi.Problem {
	t.Helper()
	require.Equal(t, httpapi.ContentTypeProblem, resp.headers.Get("Content-Type"), "body: %s", resp.body)
	var p httpapi.Problem
	require.NoError(t, json.Unmarshal([]byte(resp.body), &p))
	require.Equal(t, resp.status, p.Status)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.Detail)
	return p
}

// withoutReplayHeader returns resp without Idempotent-Replayed, to compare
// a replay with the first response.
func withoutReplayHeader(resp httpResp) httpResp {
	resp.headers = resp.headers.Clone()
	resp.headers.Del(httpapi.HeaderReplayed)
	return resp
}

// recordingStore returns a memory store that keeps the records of its
// Update calls (faultstore.Store.Updates).
func recordingStore() *faultstore.Store {
	return &faultstore.Store{Inner: memory.New(), KeepUpdates: true}
}

// limitedStore completes records without their response, as a store
// whose item size limit the response exceeds.
type limitedStore struct{ persistence.Store }

func (s limitedStore) Update(ctx context.Context, rec *persistence.Record) error {
	cut := *rec
	cut.Response, cut.ResponseOmitted = nil, true
	if err := s.Store.Update(ctx, &cut); err != nil {
		return err
	}
	return persistence.ErrResponseOmitted
}

// corruptingStore completes records with a response the adapter cannot
// read, as one written by an incompatible version would be.
type corruptingStore struct {
	persistence.Store
	response string
}

func (s corruptingStore) Update(ctx context.Context, rec *persistence.Record) error {
	bad := *rec
	bad.Response = []byte(s.response)
	return s.Store.Update(ctx, &bad)
}

// discard returns a logger for tests that provoke errors on purpose.
func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// as returns opts as options of kind O, for an entry point: the tests
// share lists of options across entry points, which each take a kind of
// their own.
func as[O any](opts []any) []O {
	out := make([]O, len(opts))
	for i, o := range opts {
		if o != nil {
			out[i] = o.(O)
		}
	}
	return out
}
