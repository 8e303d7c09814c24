package httpapi

import (
	"bytes"
	"testing"

	"github.com/retrysafe/retrysafe/internal/core"
)

// TestFingerprintsWithoutQueryAreStable pins the fingerprint of a request
// without a query string: records written before query strings counted
// must still match their retries.
func TestFingerprintsWithoutQueryAreStable(t *testing.T) {
	e := &engine{cfg: &config{settings: settings{fingerprintHeaders: []string{"x-api-version"}}}}
	r := &Request{Method: "POST", Path: "/orders", body: `{"item":"book"}`,
		headers: map[string]string{"X-Api-Version": "2"}, query: map[string]string{}}
	got, err := e.cfg.fingerprint(r)
	if err != nil {
		t.Fatal(err)
	}
	const want = "f04055e3370adc1505a74678438377dd11b80bf9e82e7b8fad6b2dab405395bd"
	if hash := core.Hash(got); hash != want {
		t.Errorf("fingerprint = %s, want %s", hash, want)
	}
	r.query = map[string]string{"dry_run": "true"}
	if withQuery, _ := e.cfg.fingerprint(r); bytes.Equal(withQuery, got) {
		t.Error("a query string does not change the fingerprint")
	}
}
