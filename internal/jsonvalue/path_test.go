package jsonvalue

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parsePath turns "a.b.0.-1" into steps; numbers are indexes.
func parsePath(s string) []Step {
	if s == "" {
		return nil
	}
	var path []Step
	for _, part := range strings.Split(s, ".") {
		if n, err := strconv.Atoi(part); err == nil {
			path = append(path, Element(n))
		} else {
			path = append(path, Member(part))
		}
	}
	return path
}

var paths = []string{
	"", "body", "headers.Accept", "headers.Missing", "requestContext.identity.sourceIp",
	"multiValueHeaders.Accept.0", "multiValueHeaders.Accept.-1", "multiValueHeaders.Accept.5",
	"Records.0.body", "Records.-1.messageId", "Records.0.messageAttributes.Number.stringValue",
	"Records.0.kinesis.data", "Records.0.dynamodb.Keys.Id.N", "isBase64Encoded", "body.x",
	"0", "resource.0", "time", "when", "bytes", "bytes.0", "array.1", "nums.0", "big", "map.1",
	"tmap.key:x", "raw.a.1", "raw.b", "inner.n", "pm.ptr", "emb.n", "emb.name", "opt.n", "ptr.n",
	"iface.k.1", "notZero", "zero", "headers.X-Id", "Dash", "-", "NoTag",
}

func TestLookupJSONMatchesWalk(t *testing.T) {
	docs := eventFiles(t)
	sample, err := json.Marshal(sampleValue())
	require.NoError(t, err)
	docs["sample"] = sample
	docs["scalars"] = []byte(`[1, "two", null, {"a": [true]}]`)
	for name, doc := range docs {
		full, err := Decode(doc, nil)
		require.NoError(t, err)
		for _, p := range paths {
			got, err := LookupJSON(doc, parsePath(p))
			require.NoError(t, err, "%s in %s", p, name)
			assert.Equal(t, Walk(full, parsePath(p)), got, "%s in %s", p, name)
		}
	}
}

func TestLookupJSONChecksWholeDocument(t *testing.T) {
	for _, doc := range []string{`{"a": 1, "b": }`, `{"a": 1} x`, `[1, 2, oops]`, `{"b": [1, 2], "a": "\x"}`} {
		for _, p := range []string{"a", "b.0", "b.-1", "x.y", "0", "-1"} {
			_, err := LookupJSON([]byte(doc), parsePath(p))
			assert.Error(t, err, "%s in %s", p, doc)
		}
	}
	got, err := LookupJSON([]byte(`{"a": 1, "a": 2}`), parsePath("a"))
	require.NoError(t, err)
	assert.Equal(t, 2.0, got, "the last duplicate wins")
	got, err = LookupJSON([]byte(`{"a\u0062": "escaped"}`), parsePath("ab"))
	require.NoError(t, err)
	assert.Equal(t, "escaped", got)
}

func TestLookupGoMatchesWalk(t *testing.T) {
	v := sampleValue()
	values := map[string]any{"struct": v, "pointer": &v, "nil": nil, "nil pointer": (*sample)(nil)}
	for name, data := range eventFiles(t) {
		var api events.APIGatewayProxyRequest
		var sqs events.SQSEvent
		var ddb events.DynamoDBEvent
		require.NoError(t, json.Unmarshal(data, &api))
		require.NoError(t, json.Unmarshal(data, &sqs))
		values[name+" api"] = api
		values[name+" sqs"] = &sqs
		if json.Unmarshal(data, &ddb) == nil {
			values[name+" ddb"] = ddb
		}
	}
	for name, value := range values {
		full, err := FromGo(value, nil)
		require.NoError(t, err)
		for _, p := range paths {
			got, err := LookupGo(value, parsePath(p))
			require.NoError(t, err, "%s in %s", p, name)
			assert.Equal(t, Walk(full, parsePath(p)), got, "%s in %s", p, name)
		}
	}
}

func FuzzLookupJSON(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":"x"}]}}`), "a.b.1.c")
	f.Add([]byte(`[1,2,3]`), "-1")
	f.Add([]byte(`{"a":1,"a":{"b":2}}`), "a.b")
	f.Fuzz(func(t *testing.T, doc []byte, p string) {
		path := parsePath(p)
		got, err := LookupJSON(doc, path)
		full, fullErr := Decode(doc, nil)
		if (err == nil) != (fullErr == nil) {
			t.Fatalf("LookupJSON error %v, Decode error %v", err, fullErr)
		}
		if err != nil {
			return
		}
		want := Walk(full, path)
		g, _ := AppendCanonical(nil, got)
		w, _ := AppendCanonical(nil, want)
		if string(g) != string(w) {
			t.Fatalf("LookupJSON(%q, %q) = %s, want %s", doc, p, g, w)
		}
	})
}
