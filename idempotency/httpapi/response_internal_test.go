package httpapi

import "testing"

func TestDecodeResponse(t *testing.T) {
	resp, err := decodeResponse([]byte(`{"statusCode":201,"headers":{"A":"b"},"cookies":["c=1"],"body":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Headers["A"] != "b" || len(resp.Cookies) != 1 || resp.Body != "x" {
		t.Fatalf("decoded %+v", resp)
	}
	for _, bad := range []string{`{"statusCode":99}`, `{"statusCode":600}`, `[]`, `{`} {
		if _, err := decodeResponse([]byte(bad)); err == nil {
			t.Errorf("decodeResponse(%s) succeeded", bad)
		}
	}
}
