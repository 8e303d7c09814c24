package httpapi

import "testing"

// TestStoredResponsesDecodeCompiled: the stored form is a plain struct,
// so replays decode it without falling back to encoding/json's reflection.
func TestStoredResponsesDecodeCompiled(t *testing.T) {
	if !responses.Compiled() {
		t.Fatal("the stored response type no longer compiles")
	}
	resp, err := decodeResponse([]byte(`{"statusCode":201,"headers":{"A":"b"},"cookies":["c=1"],"body":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Headers["A"] != "b" || len(resp.Cookies) != 1 || resp.Body != "x" {
		t.Fatalf("decoded %+v", resp)
	}
}
