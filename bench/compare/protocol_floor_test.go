package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// recorder is an HTTP client that keeps the bodies of the requests it is
// sent, and answers each with an empty success.
type recorder struct{ bodies []map[string]any }

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	r.bodies = append(r.bodies, body)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// TestProtocolFloorMakesTheLibrarysRequests checks that the protocol's
// floor sends what the library sends for a first call, but for the values
// that differ from call to call (the owner token and the times): the same
// items, conditions, names and updates. Its cost over the library's is
// then the library's code alone.
func TestProtocolFloorMakesTheLibrarysRequests(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "event.json"))
	require.NoError(t, err)
	var ev events.APIGatewayProxyRequest
	require.NoError(t, json.Unmarshal([]byte(strings.Replace(string(raw), "ORDER_ID", "order-1", 1)), &ev))
	newClient := func(r *recorder) *awsdynamodb.Client {
		return awsdynamodb.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
			BaseEndpoint: aws.String("http://127.0.0.1:1"), HTTPClient: r})
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var lib, floor recorder
	store, err := dynamodb.New(newClient(&lib), "orders")
	require.NoError(t, err)
	wrapped, err := idempotency.Wrap(respond, store, idempotency.WithKey(key), idempotency.WithKeyPrefix("orders"))
	require.NoError(t, err)
	_, err = wrapped(ctx, ev)
	require.NoError(t, err)
	_, err = (&sdkFloor{client: newClient(&floor), table: "orders", protocol: true}).first(ctx, ev)
	require.NoError(t, err)

	require.Len(t, lib.bodies, 2, "a PutItem and an UpdateItem")
	require.Equal(t, normalize(lib.bodies), normalize(floor.bodies))
}

// normalize replaces the values that differ between calls in request
// bodies: every number, the owner token, and the record key's hash (the
// floor's is the body's SHA-256), keeping its length.
func normalize(bodies []map[string]any) []map[string]any {
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "N" {
					v[k] = "<number>"
					continue
				}
				v[k] = walk(x)
			}
		case []any:
			for i, x := range v {
				v[i] = walk(x)
			}
		}
		return v
	}
	for _, b := range bodies {
		for _, m := range []string{"Item", "Key"} {
			if item, ok := b[m].(map[string]any); ok {
				id := item["id"].(map[string]any)["S"].(string)
				item["id"] = fmt.Sprintf("%.7s<hash of %d bytes>", id, len(id)-7)
				if m == "Item" {
					item["owner_token"] = "<token>"
				}
			}
		}
		if vals, ok := b["ExpressionAttributeValues"].(map[string]any); ok && vals[":t"] != nil {
			vals[":t"] = "<token>"
		}
		walk(b)
	}
	return bodies
}
