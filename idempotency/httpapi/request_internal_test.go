package httpapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRequestHeaderLookup(t *testing.T) {
	r := Request{
		headers: map[string]string{
			"Content-Type":    "application/json",
			"X-Trace":         "single",
			"idempotency-key": "b",
			"Idempotency-Key": "a",
		},
		multiHeaders: map[string][]string{
			"X-Trace": {"m1", "m2"},
			"x-trace": {"m3"},
		},
	}
	assert.Equal(t, []string{"application/json"}, r.Values("content-type"))
	assert.Equal(t, "application/json", r.Header("CONTENT-TYPE"))
	assert.Equal(t, []string{"a", "b"}, r.Values("IDEMPOTENCY-KEY"), "spellings merge in sorted key order")
	assert.Equal(t, []string{"m1", "m2", "m3"}, r.Values("x-trace"), "multi-value headers win")
	assert.Nil(t, r.Values("Absent"))
	assert.Equal(t, "", r.Header("Absent"))
}

func TestStores(t *testing.T) {
	for status, want := range map[int]bool{
		0: false, 100: false, 101: false, 200: true, 201: true, 204: true, 301: true, 304: true,
		400: true, 401: false, 402: true, 403: false, 404: true, 408: false, 409: false, 422: true,
		425: false, 429: false, 499: true,
		500: false, 503: false, 599: false, 600: false, 999: false, -1: false,
	} {
		assert.Equal(t, want, stores(status, false), "%d", status)
	}
	assert.True(t, stores(500, true))
	assert.True(t, stores(599, true))
	assert.False(t, stores(429, true))
	assert.False(t, stores(408, true))
	assert.False(t, stores(401, true))
	assert.False(t, stores(600, true))
}
