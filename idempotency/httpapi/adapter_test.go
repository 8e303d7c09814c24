package httpapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/internal/testing/testlog"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

const orderA = `{"item":"book","qty":1}`

// TestAdapters runs every row of the issue for every event type.
func TestAdapters(t *testing.T) {
	rows := []struct {
		name string
		test func(t *testing.T, et eventType)
	}{
		{"missing key", testMissingKey},
		{"invalid keys", testInvalidKeys},
		{"valid key forms", testValidKeyForms},
		{"methods without keys pass through", testPassThroughMethods},
		{"in-flight duplicate", testInFlight},
		{"completed replay", testReplay},
		{"payload mismatch", testPayloadMismatch},
		{"query strings", testQueryStrings},
		{"released statuses", testReleasedStatuses},
		{"stored statuses", testStoredStatuses},
		{"store server errors", testStoreServerErrors},
		{"scopes", testScopes},
		{"scopes do not block each other", testScopesDoNotBlock},
		{"base64 bodies", testBase64Bodies},
		{"repeated key headers", testRepeatedKeyHeaders},
		{"multi-value response headers", testMultiValueResponse},
		{"mixed-case header names", testMixedCase},
		{"handler error", testHandlerError},
		{"handler panic", testHandlerPanic},
		{"optional key", testOptionalKey},
		{"store failure", testStoreFailure},
		{"not committed", testNotCommitted},
		{"no transactions", testNoTransactions},
		{"recorded error", testRecordedError},
		{"response too large", testResponseTooLarge},
		{"unreadable stored response", testReplayFailed},
		{"nothing of the request is stored", testNothingOfRequestStored},
		{"a day's expiry by default", testDefaultExpiry},
		{"responses marked not executed", testMarkNotExecuted},
		{"Retry-After estimates the handler's duration", testRetryAfterEstimate},
		{"a waiting duplicate gets the replay", testWaitingDuplicate},
		{"disabled: the handler's own answers", testDisabled},
	}
	forEachEventType(t, func(t *testing.T, et eventType) {
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) { row.test(t, et) })
		}
	})
}

func testMissingKey(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, memory.New())
	resp, err := send(t.Context(), post("", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.status)
	p := problemOf(t, resp)
	assert.Equal(t, httpapi.ProblemMissingKey, p.Type)
	assert.Equal(t, "A POST request to this API needs the Idempotency-Key header. Generate a unique key (a UUID) for each operation "+
		"and send it with every retry of that operation.", p.Detail)
	assert.Empty(t, resp.headers.Get("Retry-After"))
	assert.Zero(t, a.count())
	if strings.HasPrefix(et.name, "ALB") {
		assert.Equal(t, "400 Bad Request", resp.description)
	}
}

func testInvalidKeys(t *testing.T, et eventType) {
	for name, tc := range map[string]struct{ key, detail string }{
		"empty":                    {``, "is empty"},
		"blank":                    {`   `, "is empty"},
		"empty quoted":             {`""`, "is empty"},
		"too long":                 {strings.Repeat("k", 256), "is longer than 255 characters"},
		"too long in characters":   {strings.Repeat("é", 256), "is longer than 255 characters"},
		"too long quoted":          {`"` + strings.Repeat("k", 256) + `"`, "is longer than 255 characters"},
		"control character":        {"a\x01b", "contains control characters"},
		"DEL":                      {"a\x7fb", "contains control characters"},
		"C1 control":               {"a\u0085b", "contains control characters"},
		"control in quotes":        {"\"a\tb\"", "contains control characters"},
		"unterminated":             {`"abc`, "is a quoted string without its closing quote"},
		"bad escape":               {`"a\nb"`, `is a quoted string with an invalid escape; only \" and \\ are allowed`},
		"parameters":               {`"abc";v=1`, "has text after its closing quote; send one quoted string without parameters"},
		"non-ASCII in quotes":      {`"ключ"`, "is a quoted string with characters other than printable ASCII"},
		"bare comma":               {`a,b`, "carries several different keys; send one"},
		"structured list of items": {`"a", "b"`, "carries several different keys; send one"},
		"empty item in a list":     {`"a",`, "is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			var a app
			send := et.wrap(t, a.handle, memory.New())
			resp, err := send(t.Context(), post("", orderA, header{"Idempotency-Key", tc.key}))
			require.NoError(t, err)
			assert.Equal(t, http.StatusBadRequest, resp.status)
			p := problemOf(t, resp)
			assert.Equal(t, httpapi.ProblemInvalidKey, p.Type)
			assert.Equal(t, "The Idempotency-Key header "+tc.detail+".", p.Detail)
			assert.Zero(t, a.count())
		})
	}
}

func testValidKeyForms(t *testing.T, et eventType) {
	for name, forms := range map[string][2]string{
		"quoted then bare":         {`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `8e03978e-40d5-43e8-bc93-6894a57f9324`},
		"bare then quoted":         {`k-1`, `"k-1"`},
		"escapes":                  {`"a\"b\\c"`, `a"b\c`},
		"comma inside quotes":      {`"a,b"`, `"a,b"`},
		"spaces around and inside": {`  a b  `, `"a b"`},
		"255 characters":           {strings.Repeat("k", 255), `"` + strings.Repeat("k", 255) + `"`},
		"255 non-ASCII characters": {strings.Repeat("é", 255), strings.Repeat("é", 255)},
	} {
		t.Run(name, func(t *testing.T) {
			var a app
			send := et.wrap(t, a.handle, memory.New())
			first, err := send(t.Context(), post("", orderA, header{"Idempotency-Key", forms[0]}))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, first.status, first.body)
			again, err := send(t.Context(), post("", orderA, header{"Idempotency-Key", forms[1]}))
			require.NoError(t, err)
			assert.Equal(t, "true", again.headers.Get(httpapi.HeaderReplayed), "both forms give the same key")
			assert.Equal(t, 1, a.count())
		})
	}
}

func testPassThroughMethods(t *testing.T, et eventType) {
	for _, method := range []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"} {
		t.Run(method, func(t *testing.T) {
			var a app
			send := et.wrap(t, a.handle, memory.New())
			for _, key := range []string{"k1", "k1", "", "not a valid key,"} {
				req := post("", "")
				req.method = method
				if key != "" {
					req.headers = append(req.headers, header{"Idempotency-Key", key})
				}
				resp, err := send(t.Context(), req)
				require.NoError(t, err)
				assert.Equal(t, http.StatusCreated, resp.status)
				assert.Empty(t, resp.headers.Get(httpapi.HeaderReplayed))
			}
			assert.Equal(t, 4, a.count(), "every request runs the handler")
		})
	}
	t.Run("WithMethods", func(t *testing.T) {
		var a app
		send := et.wrap(t, a.handle, memory.New(), httpapi.WithMethods("put"))
		put := post("k1", orderA)
		put.method = "PUT"
		for range 2 {
			_, err := send(t.Context(), put)
			require.NoError(t, err)
		}
		put.headers = put.headers[:1]
		resp, err := send(t.Context(), put)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, resp.status)
		assert.Equal(t, 1, a.count())
		for range 2 {
			resp, err := send(t.Context(), post("", orderA))
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.status, "POST no longer needs a key")
		}
		assert.Equal(t, 3, a.count())
	})
}

func testInFlight(t *testing.T, et eventType) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		a := app{respond: func(run int, req httpReq) (httpResp, error) {
			if run == 1 {
				close(entered)
				<-release
			}
			return created(run), nil
		}}
		send := et.wrap(t, a.handle, memory.New())

		// The first request runs in an invocation with 30 seconds left.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var first httpResp
		var wg sync.WaitGroup
		wg.Go(func() {
			var err error
			first, err = send(ctx, post("k1", orderA))
			assert.NoError(t, err)
		})
		<-entered

		dup, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, http.StatusConflict, dup.status)
		assert.Equal(t, "2", dup.headers.Get("Retry-After"), "no estimate yet: the default cap of 2 seconds")
		p := problemOf(t, dup)
		assert.Equal(t, httpapi.Problem{
			Type:   httpapi.ProblemKeyInUse,
			Title:  "Request with this idempotency key in progress",
			Status: http.StatusConflict,
			Detail: "A request with the same Idempotency-Key is still being processed. Retry after the delay in Retry-After to get its response.",
		}, p)
		if strings.HasPrefix(et.name, "ALB") {
			assert.Equal(t, "409 Conflict", dup.description)
		}

		time.Sleep(29*time.Second + 500*time.Millisecond)
		dup, err = send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, "1", dup.headers.Get("Retry-After"), "half a second until the reservation lapses: at least 1")

		// A duplicate with another body is a mismatch even in flight: the
		// fingerprint is compared first.
		dup, err = send(t.Context(), post("k1", `{"other":true}`))
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnprocessableEntity, dup.status)

		close(release)
		wg.Wait()
		assert.Equal(t, http.StatusCreated, first.status)
		replay, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, first, withoutReplayHeader(replay))
		assert.Equal(t, 1, a.count())
	})
}

func testReplay(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, memory.New())
	first, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.status)
	assert.Empty(t, first.headers.Values(httpapi.HeaderReplayed), "the first response is not a replay")
	for range 3 {
		replay, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, []string{"true"}, replay.headers.Values(httpapi.HeaderReplayed))
		assert.Equal(t, first, withoutReplayHeader(replay), "the replay is the first response, byte for byte")
	}
	assert.Equal(t, `{"id":"ord_1","note":"<a & b>"}`, first.body)
	assert.Equal(t, 1, a.count())

	other, err := send(t.Context(), post("k2", orderA))
	require.NoError(t, err)
	assert.Equal(t, `{"id":"ord_2","note":"<a & b>"}`, other.body, "another key runs the handler")
}

func testPayloadMismatch(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, memory.New())
	_, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)

	otherPath := post("k1", orderA)
	otherPath.path = "/refunds"
	otherMethod := post("k1", orderA)
	otherMethod.method = "PATCH"
	withQuery := post("k1", orderA)
	withQuery.query = []header{{"dry_run", "true"}}
	for name, req := range map[string]httpReq{
		"body":   post("k1", `{"item":"book","qty":2}`),
		"path":   otherPath,
		"method": otherMethod,
		"query":  withQuery,
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := send(t.Context(), req)
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnprocessableEntity, resp.status)
			p := problemOf(t, resp)
			assert.Equal(t, httpapi.ProblemKeyReused, p.Type)
			assert.Equal(t, "The Idempotency-Key was already used for a request that differs from this one (method, path, query or body). "+
				"Use a new key for a new request.", p.Detail)
		})
	}
	replay, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, "true", replay.headers.Get(httpapi.HeaderReplayed), "the original request still replays")
	assert.Equal(t, 1, a.count())
}

// testQueryStrings checks that query parameters are part of the request
// that a key stands for, whatever their order.
func testQueryStrings(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, memory.New())
	withQuery := func(params ...header) httpReq {
		req := post("k1", orderA)
		req.query = params
		return req
	}
	first, err := send(t.Context(), withQuery(header{"a", "1"}, header{"b", "2"}, header{"b", "3"}))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.status)

	reordered, err := send(t.Context(), withQuery(header{"b", "2"}, header{"b", "3"}, header{"a", "1"}))
	require.NoError(t, err)
	assert.Equal(t, "true", reordered.headers.Get(httpapi.HeaderReplayed), "the same parameters in another order replay")
	for name, req := range map[string]httpReq{
		"another value": withQuery(header{"a", "1"}, header{"b", "2"}, header{"b", "4"}),
		"none":          post("k1", orderA),
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := send(t.Context(), req)
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnprocessableEntity, resp.status)
			assert.Equal(t, httpapi.ProblemKeyReused, problemOf(t, resp).Type)
		})
	}
	assert.Equal(t, 1, a.count())
}

func testReleasedStatuses(t *testing.T, et eventType) {
	for _, code := range []int{500, 502, 503, 504, 401, 403, 408, 409, 425, 429} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			a := app{respond: func(run int, _ httpReq) (httpResp, error) {
				if run == 1 {
					return status(code, "try again"), nil
				}
				return created(run), nil
			}}
			send := et.wrap(t, a.handle, memory.New())
			resp, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Equal(t, code, resp.status)
			assert.Equal(t, "try again", resp.body, "the handler's own response")
			assert.Equal(t, "text/plain", resp.headers.Get("Content-Type"))

			retry, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, retry.status, "the key was released: the retry runs")
			assert.Empty(t, retry.headers.Get(httpapi.HeaderReplayed))
			replay, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Equal(t, retry, withoutReplayHeader(replay))
			assert.Equal(t, 2, a.count())
		})
	}
}

func testStoredStatuses(t *testing.T, et eventType) {
	for _, code := range []int{200, 202, 204, 302, 400, 402, 404, 410, 422} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			a := app{respond: func(run int, _ httpReq) (httpResp, error) {
				return status(code, "run "+strconv.Itoa(run)), nil
			}}
			send := et.wrap(t, a.handle, memory.New())
			first, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			replay, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Equal(t, code, replay.status)
			assert.Equal(t, "true", replay.headers.Get(httpapi.HeaderReplayed))
			assert.Equal(t, first, withoutReplayHeader(replay))
			assert.Equal(t, 1, a.count())
		})
	}
}

func testStoreServerErrors(t *testing.T, et eventType) {
	a := app{respond: func(run int, _ httpReq) (httpResp, error) {
		return status(http.StatusBadGateway, "upstream failed after charging, run "+strconv.Itoa(run)), nil
	}}
	send := et.wrap(t, a.handle, memory.New(), httpapi.WithStoreServerErrors())
	first, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	replay, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, "true", replay.headers.Get(httpapi.HeaderReplayed))
	assert.Equal(t, first, withoutReplayHeader(replay))
	assert.Equal(t, 1, a.count())

	b := app{respond: func(run int, _ httpReq) (httpResp, error) {
		return status(http.StatusTooManyRequests, "slow down"), nil
	}}
	send = et.wrap(t, b.handle, memory.New(), httpapi.WithStoreServerErrors())
	for range 2 {
		_, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
	}
	assert.Equal(t, 2, b.count(), "429 is released even so")
}

func testScopes(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, memory.New(), httpapi.WithScope(httpapi.ScopeHeader("X-Tenant")), idempotency.WithLogger(discard()))
	tenant := func(name, body string) httpReq { return post("k1", body, header{"X-Tenant", name}) }

	acme, err := send(t.Context(), tenant("acme", orderA))
	require.NoError(t, err)
	globex, err := send(t.Context(), tenant("globex", `{"item":"pen"}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, globex.status, "same key, other scope: no mismatch")
	assert.NotEqual(t, acme.body, globex.body)

	for name, want := range map[string]httpResp{"acme": acme, "globex": globex} {
		body := orderA
		if name == "globex" {
			body = `{"item":"pen"}`
		}
		replay, err := send(t.Context(), tenant(name, body))
		require.NoError(t, err)
		assert.Equal(t, want, withoutReplayHeader(replay), "each scope replays its own response")
	}
	assert.Equal(t, 2, a.count())
	assert.NotEqual(t, a.keys[0], a.keys[1], "scopes never share a record")

	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.status)
	p := problemOf(t, resp)
	assert.Equal(t, httpapi.ProblemMissingScope, p.Type)
	assert.Equal(t, 2, a.count())

	// Requests without a key never ask for a scope.
	get := post("", "")
	get.method = "GET"
	resp, err = send(t.Context(), get)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.status)
}

func testScopesDoNotBlock(t *testing.T, et eventType) {
	entered, release := make(chan struct{}), make(chan struct{})
	a := app{respond: func(run int, req httpReq) (httpResp, error) {
		if run == 1 {
			close(entered)
			<-release
		}
		return created(run), nil
	}}
	send := et.wrap(t, a.handle, memory.New(), httpapi.WithScope(httpapi.ScopeHeader("X-Tenant")))
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := send(t.Context(), post("k1", orderA, header{"X-Tenant", "acme"}))
		assert.NoError(t, err)
	})
	<-entered
	resp, err := send(t.Context(), post("k1", orderA, header{"X-Tenant", "globex"}))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.status, "another scope's request in flight does not block this one")
	resp, err = send(t.Context(), post("k1", orderA, header{"X-Tenant", "acme"}))
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, resp.status)
	close(release)
	wg.Wait()
}

func testBase64Bodies(t *testing.T, et eventType) {
	a := app{respond: func(run int, req httpReq) (httpResp, error) {
		return httpResp{status: http.StatusOK, headers: http.Header{"Content-Type": {"application/octet-stream"}},
			body: base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff, byte(run)}), base64: true}, nil
	}}
	send := et.wrap(t, a.handle, memory.New())
	encoded := func(key, body string) httpReq {
		req := post(key, base64.StdEncoding.EncodeToString([]byte(body)))
		req.base64 = true
		return req
	}
	first, err := send(t.Context(), encoded("k1", "hello, world"))
	require.NoError(t, err)
	assert.True(t, first.base64)

	plain, err := send(t.Context(), post("k1", "hello, world"))
	require.NoError(t, err)
	assert.Equal(t, first, withoutReplayHeader(plain), "the same bytes, whether or not the event encoded them, are the same request")
	assert.Equal(t, "true", plain.headers.Get(httpapi.HeaderReplayed))

	other, err := send(t.Context(), encoded("k1", "hello, World"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, other.status)
	assert.Equal(t, 1, a.count())

	// A body flagged as encoded that does not decode is fingerprinted as it
	// is, and reaches the handler, which decides what it means.
	broken := post("k2", "not base64!")
	broken.base64 = true
	resp, err := send(t.Context(), broken)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.status)
}

func testRepeatedKeyHeaders(t *testing.T, et eventType) {
	twice := func(v1, v2 string) httpReq {
		return post("", orderA, header{"Idempotency-Key", v1}, header{"Idempotency-Key", v2})
	}
	t.Run("same key", func(t *testing.T) {
		var a app
		send := et.wrap(t, a.handle, memory.New())
		// Every event type accepts the same key twice, whether it passes
		// the lines apart or joins them with commas ("k1,k1").
		resp, err := send(t.Context(), twice("k1", "k1"))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.status)
		resp, err = send(t.Context(), twice(`"k1"`, "k1"))
		require.NoError(t, err)
		assert.Equal(t, "true", resp.headers.Get(httpapi.HeaderReplayed), "the same key in both forms is one key")
		resp, err = send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, "true", resp.headers.Get(httpapi.HeaderReplayed), "the same key, once")

		// A quoted key with a comma, twice: the commas inside quotes do
		// not split it.
		resp, err = send(t.Context(), twice(`"a,b"`, `"a,b"`))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.status)
		assert.Equal(t, 2, a.count())
	})
	t.Run("different keys", func(t *testing.T) {
		var a app
		send := et.wrap(t, a.handle, memory.New())
		resp, err := send(t.Context(), twice("k1", "k2"))
		require.NoError(t, err)
		if !et.multiValue && !et.joined {
			// ALB without multi-value headers passes the last line only.
			assert.Equal(t, http.StatusCreated, resp.status)
			return
		}
		assert.Equal(t, http.StatusBadRequest, resp.status)
		p := problemOf(t, resp)
		assert.Equal(t, httpapi.ProblemInvalidKey, p.Type)
		if et.multiValue {
			assert.Equal(t, "The Idempotency-Key header carries several different keys; send one.", p.Detail)
		}
		assert.Zero(t, a.count())
	})
}

func testMultiValueResponse(t *testing.T, et eventType) {
	a := app{respond: func(run int, _ httpReq) (httpResp, error) {
		resp := created(run)
		resp.headers["Link"] = []string{"</orders>; rel=collection", "</customers/1>; rel=customer"}
		resp.cookies = []string{"a=1; Path=/", "b=2; Path=/"}
		return resp, nil
	}}
	send := et.wrap(t, a.handle, memory.New())
	first, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	replay, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, first, withoutReplayHeader(replay))
	if et.multiValue {
		assert.Len(t, replay.headers.Values("Link"), 2)
		assert.Len(t, replay.cookies, 2)
	}
	if et.joined {
		assert.Equal(t, []string{"a=1; Path=/", "b=2; Path=/"}, replay.cookies)
	}
}

func testMixedCase(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, memory.New(), httpapi.WithFingerprintHeaders("x-API-version"))
	req := func(keyHeader, key, versionHeader, version string) httpReq {
		return post("", orderA, header{keyHeader, key}, header{versionHeader, version})
	}
	first, err := send(t.Context(), req("iDEMPOTENCY-kEY", "k1", "X-Api-Version", "2"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.status)
	replay, err := send(t.Context(), req("idempotency-key", "k1", "x-api-version", "2"))
	require.NoError(t, err)
	assert.Equal(t, "true", replay.headers.Get(httpapi.HeaderReplayed))

	other, err := send(t.Context(), req("IDEMPOTENCY-KEY", "k1", "X-API-VERSION", "3"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, other.status, "a fingerprinted header differs")
	assert.Equal(t, "The Idempotency-Key was already used for a request that differs from this one "+
		"(method, path, query, body or headers x-api-version). Use a new key for a new request.", problemOf(t, other).Detail)

	missing, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, missing.status, "an absent fingerprinted header differs too")
	assert.Equal(t, 1, a.count())

	var b app
	send = et.wrap(t, b.handle, memory.New(), httpapi.WithHeader("x-request-key"))
	for _, name := range []string{"X-Request-Key", "X-REQUEST-KEY"} {
		_, err := send(t.Context(), post("", orderA, header{name, "k1"}))
		require.NoError(t, err)
	}
	assert.Equal(t, 1, b.count())
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.status, "Idempotency-Key is not the configured header")
	assert.Contains(t, problemOf(t, resp).Detail, "needs the x-request-key header")
}

var errDeclined = errors.New("card declined")

func testHandlerError(t *testing.T, et eventType) {
	skipForHandlers(t, et)
	a := app{respond: func(run int, _ httpReq) (httpResp, error) {
		if run == 1 {
			return httpResp{}, errDeclined
		}
		return created(run), nil
	}}
	send := et.wrap(t, a.handle, memory.New(), idempotency.WithLogger(discard()))
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, resp.status)
	p := problemOf(t, resp)
	assert.Equal(t, httpapi.ProblemHandlerFailed, p.Type)
	assert.NotContains(t, p.Detail, errDeclined.Error(), "the handler's error stays on the server")

	resp, err = send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.status, "the key was released")
	assert.Equal(t, 2, a.count())

	t.Run("WithReturnErrors", func(t *testing.T) {
		a := app{respond: func(run int, _ httpReq) (httpResp, error) {
			if run == 1 {
				return status(http.StatusTeapot, "partial"), errDeclined
			}
			return created(run), nil
		}}
		send := et.wrap(t, a.handle, memory.New(), httpapi.WithReturnErrors())
		resp, err := send(t.Context(), post("k1", orderA))
		require.ErrorIs(t, err, errDeclined)
		assert.Same(t, errDeclined, err, "the handler's error, unchanged")
		assert.Equal(t, "partial", resp.body, "with the response the handler returned with it")
		resp, err = send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.status)
	})
}

func testHandlerPanic(t *testing.T, et eventType) {
	a := app{respond: func(run int, _ httpReq) (httpResp, error) {
		if run == 1 {
			panic("nil map")
		}
		return created(run), nil
	}}
	logger, logs := testlog.Text()
	send := et.wrap(t, a.handle, memory.New(), idempotency.WithLogger(logger))
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, resp.status)
	assert.Equal(t, httpapi.ProblemHandlerFailed, problemOf(t, resp).Type)
	assert.Contains(t, logs.String(), "nil map")
	assert.Contains(t, logs.String(), "adapter_test.go", "the log carries the panic's stack")

	resp, err = send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.status, "the key was released")

	t.Run("WithReturnErrors", func(t *testing.T) {
		a := app{respond: func(run int, _ httpReq) (httpResp, error) {
			if run == 1 {
				panic("nil map")
			}
			return created(run), nil
		}}
		send := et.wrap(t, a.handle, memory.New(), httpapi.WithReturnErrors())
		assert.PanicsWithValue(t, "nil map", func() { _, _ = send(t.Context(), post("k1", orderA)) })
		resp, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.status, "the key was released before the panic went on")
	})
}

func testOptionalKey(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, memory.New(), httpapi.WithOptionalKey())
	for range 2 {
		resp, err := send(t.Context(), post("", orderA))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.status)
		assert.Empty(t, resp.headers.Get(httpapi.HeaderReplayed))
	}
	assert.Equal(t, 2, a.count(), "unprotected")
	resp, err := send(t.Context(), post("", orderA, header{"Idempotency-Key", ""}))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.status, "an empty key is still invalid")
}

func testStoreFailure(t *testing.T, et eventType) {
	var a app
	store := faultstore.New(memory.New())
	store.Fault = faultstore.On(faultstore.OpPut, 1, faultstore.FailBefore)
	logger, logs := testlog.Text()
	send := et.wrap(t, a.handle, store, idempotency.WithLogger(logger))
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.status)
	assert.Equal(t, "1", resp.headers.Get("Retry-After"))
	assert.Equal(t, httpapi.ProblemStoreUnavailable, problemOf(t, resp).Type)
	assert.Zero(t, a.count(), "the handler did not run")
	assert.Contains(t, logs.String(), faultstore.ErrInjected.Error())

	resp, err = send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.status)
}

// cancelingStore commits nothing: every commit with writes is canceled, as
// when a staged write's own condition fails.
type cancelingStore struct{ persistence.Store }

func (s cancelingStore) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	if len(writes) == 0 {
		return s.Update(ctx, rec)
	}
	return &persistence.CommitCanceledError{Err: errors.New("insufficient balance")}
}

// A handler whose staged writes do not commit gets 503 not-committed, and
// the key is released: the retry runs it again.
func testNotCommitted(t *testing.T, et eventType) {
	if et.handler {
		t.Skip("Middleware refuses idempotency.WithTransactions: it writes the response through before a commit could fail")
	}
	var a app
	store := cancelingStore{memory.New()}
	send := et.wrap(t, func(ctx context.Context, req httpReq) (httpResp, error) {
		if err := persistence.Stage(ctx, "a ledger entry"); err != nil {
			return httpResp{}, err
		}
		return a.handle(ctx, req)
	}, store, idempotency.WithTransactions(), idempotency.WithLogger(slog.New(slog.DiscardHandler)))
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.status)
	assert.Equal(t, "1", resp.headers.Get("Retry-After"))
	assert.Equal(t, httpapi.ProblemNotCommitted, problemOf(t, resp).Type)
	resp, err = send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.status)
	assert.Equal(t, 2, a.count(), "the key was released: the retry ran the handler again")
}

// noTransactionsStore is a store on a server without transactions: every
// commit with writes is refused, and nothing is written.
type noTransactionsStore struct{ persistence.Store }

func (s noTransactionsStore) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	if len(writes) == 0 {
		return s.Update(ctx, rec)
	}
	return &persistence.CommitCanceledError{Err: fmt.Errorf("TransactWriteItems: UnknownOperationException: %w", persistence.ErrNoTransactions)}
}

// A store that cannot run transactions makes every commit fail: the answer
// is 500 not-committed, without Retry-After, since no retry can commit, and
// the key is released, so that a retry is not answered 409 for the whole
// reservation.
func testNoTransactions(t *testing.T, et eventType) {
	if et.handler {
		t.Skip("Middleware refuses idempotency.WithTransactions: it writes the response through before a commit could fail")
	}
	var a app
	logger, logs := testlog.Text()
	send := et.wrap(t, func(ctx context.Context, req httpReq) (httpResp, error) {
		if err := persistence.Stage(ctx, "a ledger entry"); err != nil {
			return httpResp{}, err
		}
		return a.handle(ctx, req)
	}, noTransactionsStore{memory.New()}, idempotency.WithTransactions(), idempotency.WithLogger(logger))
	for range 2 {
		resp, err := send(t.Context(), post("k1", orderA))
		require.NoError(t, err)
		assert.Equal(t, http.StatusInternalServerError, resp.status)
		assert.Empty(t, resp.headers.Get("Retry-After"))
		p := problemOf(t, resp)
		assert.Equal(t, httpapi.ProblemNotCommitted, p.Type)
		assert.Contains(t, p.Detail, "does not run transactions")
	}
	assert.Equal(t, 2, a.count(), "the key was released: the retry ran the handler again")
	assert.Contains(t, logs.String(), "turn idempotency.WithTransactions off")
}

// With POWERTOOLS_IDEMPOTENCY_DISABLED, the adapter only calls the
// handler: every call runs it, and its errors reach the caller as it
// returned them, one marked Permanent without the mark, so that Lambda
// reports the handler's own errorType.
func testDisabled(t *testing.T, et eventType) {
	if et.handler {
		t.Skip("Middleware returns the handler itself; net/http handlers return no errors")
	}
	t.Setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
	a := app{respond: func(run int, _ httpReq) (httpResp, error) {
		if run == 1 {
			return httpResp{status: http.StatusCreated}, nil
		}
		return httpResp{}, idempotency.Permanent(errDeclined)
	}}
	send := et.wrap(t, a.handle, memory.New())
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.status)
	_, err = send(t.Context(), post("k1", orderA))
	assert.Same(t, errDeclined, err)
	assert.Equal(t, 2, a.count())
}

func testRecordedError(t *testing.T, et eventType) {
	skipForHandlers(t, et)
	a := app{respond: func(run int, _ httpReq) (httpResp, error) {
		return httpResp{}, idempotency.Permanent(errDeclined)
	}}
	send := et.wrap(t, a.handle, memory.New(), idempotency.WithLogger(discard()))
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, httpapi.ProblemHandlerFailed, problemOf(t, resp).Type)
	resp, err = send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, resp.status)
	assert.Equal(t, httpapi.ProblemRecordedError, problemOf(t, resp).Type)
	assert.Equal(t, 1, a.count())

	t.Run("WithReturnErrors", func(t *testing.T) {
		a := app{respond: func(run int, _ httpReq) (httpResp, error) {
			return httpResp{}, idempotency.Permanent(errDeclined)
		}}
		send := et.wrap(t, a.handle, memory.New(), httpapi.WithReturnErrors())
		_, err := send(t.Context(), post("k1", orderA))
		assert.Same(t, errDeclined, err)
		_, err = send(t.Context(), post("k1", orderA))
		var stored *idempotency.RecordedError
		require.ErrorAs(t, err, &stored)
		assert.Equal(t, errDeclined.Error(), stored.Message)
		assert.Equal(t, 1, a.count())
	})
}

func testResponseTooLarge(t *testing.T, et eventType) {
	var a app
	send := et.wrap(t, a.handle, limitedStore{memory.New()}, idempotency.WithLogger(discard()))
	first, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, first.status, "the first caller gets its response")
	resp, err := send(t.Context(), post("k1", orderA))
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, resp.status)
	assert.Equal(t, httpapi.ProblemResponseNotStored, problemOf(t, resp).Type)
	assert.Equal(t, 1, a.count())
}

func testReplayFailed(t *testing.T, et eventType) {
	for name, stored := range map[string]string{
		"not JSON":       `{"statusCode":`,
		"no status code": `{"body":"x"}`,
		"wrong types":    `{"statusCode":"201"}`,
	} {
		t.Run(name, func(t *testing.T) {
			var a app
			logger, logs := testlog.Text()
			send := et.wrap(t, a.handle, corruptingStore{memory.New(), stored}, idempotency.WithLogger(logger))
			_, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			resp, err := send(t.Context(), post("k1", orderA))
			require.NoError(t, err)
			assert.Equal(t, http.StatusInternalServerError, resp.status)
			assert.Equal(t, httpapi.ProblemReplayFailed, problemOf(t, resp).Type)
			assert.Contains(t, logs.String(), "stored response cannot be decoded")
			assert.Equal(t, 1, a.count())
		})
	}
}

func testNothingOfRequestStored(t *testing.T, et eventType) {
	var a app
	store := recordingStore()
	send := et.wrap(t, a.handle, store, idempotency.WithKeyPrefix("orders"))
	_, err := send(t.Context(), post("secret-key-1", orderA,
		header{"Authorization", "Bearer s3cr3t-t0ken"},
		header{"X-Request-Header", "request-only-value"}))
	require.NoError(t, err)
	written := store.Updates()
	require.Len(t, written, 1)
	rec := written[0]
	assert.Regexp(t, `^orders#[0-9a-f]{64}$`, rec.Key)
	assert.Regexp(t, `^[0-9a-f]{64}$`, rec.PayloadHash)
	all := rec.Key + rec.PayloadHash + string(rec.Response) + rec.ErrorMessage
	for _, secret := range []string{"Authorization", "s3cr3t-t0ken", "X-Request-Header", "request-only-value", "secret-key-1", "book", "Idempotency-Key"} {
		assert.NotContains(t, all, secret)
	}
	assert.Contains(t, string(rec.Response), `"statusCode":201`)
	assert.Contains(t, string(rec.Response), `"body":"{\"id\":\"ord_1\",\"note\":\"<a & b>\"}"`, "bodies are stored without HTML escaping")
	assert.Equal(t, []string{rec.Key}, a.keys, "the handler's context carries the key")
}

// The adapters keep keys for Stripe's 24 hours unless told otherwise, not
// the core's hour.
func testDefaultExpiry(t *testing.T, et eventType) {
	for _, tc := range []struct {
		name   string
		opts   []any
		expiry time.Duration
	}{
		{"default", nil, httpapi.DefaultExpiry},
		{"explicit", []any{idempotency.WithExpiry(time.Hour)}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var a app
				send := et.wrap(t, a.handle, memory.New(), tc.opts...)
				_, err := send(t.Context(), post("k1", orderA))
				require.NoError(t, err)
				time.Sleep(tc.expiry - time.Second)
				resp, err := send(t.Context(), post("k1", orderA))
				require.NoError(t, err)
				assert.Equal(t, "true", resp.headers.Get(httpapi.HeaderReplayed), "a second before the expiry")
				time.Sleep(2 * time.Second)
				resp, err = send(t.Context(), post("k1", orderA))
				require.NoError(t, err)
				assert.Empty(t, resp.headers.Get(httpapi.HeaderReplayed), "a second after it, the request runs again")
				assert.Equal(t, 2, a.count())
			})
		})
	}
	assert.Equal(t, 24*time.Hour, httpapi.DefaultExpiry)
}

// A response the handler marks as not executed is returned, not stored: the
// client fixes the request and retries with the same key.
func testMarkNotExecuted(t *testing.T, et eventType) {
	marked := make(chan bool, 3)
	a := app{respond: func(run int, req httpReq) (httpResp, error) {
		return status(http.StatusBadRequest, "run "+strconv.Itoa(run)), nil
	}}
	h := func(ctx context.Context, req httpReq) (httpResp, error) {
		if req.body == `{"amount":"ten"}` {
			marked <- idempotency.MarkNotExecuted(ctx)
		}
		return a.handle(ctx, req)
	}
	send := et.wrap(t, h, memory.New())
	resp, err := send(t.Context(), post("k1", `{"amount":"ten"}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.status)
	assert.Equal(t, "run 1", resp.body)
	assert.True(t, <-marked, "the adapter's context")

	// The corrected request with the same key runs: no 422, no replay.
	resp, err = send(t.Context(), post("k1", `{"amount":10}`))
	require.NoError(t, err)
	assert.Equal(t, "run 2", resp.body)
	assert.Empty(t, resp.headers.Get(httpapi.HeaderReplayed))
	// That 400 was not marked: it is stored and replayed.
	resp, err = send(t.Context(), post("k1", `{"amount":10}`))
	require.NoError(t, err)
	assert.Equal(t, "run 2", resp.body)
	assert.Equal(t, "true", resp.headers.Get(httpapi.HeaderReplayed))
	assert.Equal(t, 2, a.count())
	assert.False(t, idempotency.MarkNotExecuted(t.Context()), "outside the adapter it does nothing")
}

// Retry-After is the handler's usual duration, rounded up to whole
// seconds, within the cap and the reservation's remaining time.
func testRetryAfterEstimate(t *testing.T, et eventType) {
	for _, tc := range []struct {
		name string
		opts []any
		took time.Duration // how long the handler takes
		want string
	}{
		{"fast handler", nil, 30 * time.Millisecond, "1"},
		{"slow handler, capped", nil, 3500 * time.Millisecond, "2"},
		{"slow handler, higher cap", []any{httpapi.WithMaxRetryAfter(10 * time.Second)}, 3500 * time.Millisecond, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				entered, release := make(chan struct{}, 1), make(chan struct{})
				a := app{respond: func(run int, req httpReq) (httpResp, error) {
					if req.body == "block" {
						entered <- struct{}{}
						<-release
					} else {
						time.Sleep(tc.took)
					}
					return created(run), nil
				}}
				send := et.wrap(t, a.handle, memory.New(), tc.opts...)
				for i := range 3 {
					_, err := send(t.Context(), post("warm-"+strconv.Itoa(i), orderA))
					require.NoError(t, err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				var wg sync.WaitGroup
				wg.Go(func() {
					_, err := send(ctx, post("k1", "block"))
					assert.NoError(t, err)
				})
				<-entered
				resp, err := send(t.Context(), post("k1", "block"))
				require.NoError(t, err)
				assert.Equal(t, http.StatusConflict, resp.status)
				assert.Equal(t, tc.want, resp.headers.Get("Retry-After"))
				close(release)
				wg.Wait()
			})
		})
	}
}

// With idempotency.WithWait, a duplicate that arrives while the first
// request runs waits for it and gets its response, replayed, instead of a
// 409; only a wait that runs out answers 409 with Retry-After.
func testWaitingDuplicate(t *testing.T, et eventType) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		a := app{respond: func(run int, req httpReq) (httpResp, error) {
			if run == 1 {
				close(entered)
				<-release
			}
			return created(run), nil
		}}
		send := et.wrap(t, a.handle, memory.New(), idempotency.WithWait(10*time.Second))
		var wg sync.WaitGroup
		var first, dup httpResp
		wg.Go(func() {
			var err error
			first, err = send(t.Context(), post("k1", orderA))
			assert.NoError(t, err)
		})
		<-entered
		wg.Go(func() {
			var err error
			dup, err = send(t.Context(), post("k1", orderA))
			assert.NoError(t, err)
		})
		time.Sleep(2 * time.Second)
		close(release)
		wg.Wait()
		assert.Equal(t, http.StatusCreated, dup.status)
		assert.Equal(t, "true", dup.headers.Get(httpapi.HeaderReplayed))
		assert.Equal(t, first, withoutReplayHeader(dup), "the first request's response, byte for byte")
		assert.Equal(t, 1, a.count())

		// A wait that runs out: 409 with Retry-After.
		slow := app{respond: func(run int, req httpReq) (httpResp, error) {
			time.Sleep(time.Minute)
			return created(run), nil
		}}
		send = et.wrap(t, slow.handle, memory.New(), idempotency.WithWait(10*time.Second))
		wg.Go(func() {
			_, err := send(t.Context(), post("k2", orderA))
			assert.NoError(t, err)
		})
		synctest.Wait()
		start := time.Now()
		resp, err := send(t.Context(), post("k2", orderA))
		require.NoError(t, err)
		assert.Equal(t, 10*time.Second, time.Since(start))
		assert.Equal(t, http.StatusConflict, resp.status)
		assert.Equal(t, httpapi.ProblemKeyInUse, problemOf(t, resp).Type)
		assert.NotEmpty(t, resp.headers.Get("Retry-After"))
		wg.Wait()
	})
}
