package jsonvalue

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
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
		checkLookupObject(t, doc, path)
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

type textString string

func (s textString) MarshalText() ([]byte, error) { return []byte("text:" + s), nil }

type plainString string

type goPathLeaf struct {
	S     string      `json:"s"`
	Named plainString `json:"named"`
	Omit  string      `json:"omit,omitempty"`
	PS    *string     `json:"ps,omitempty"`
	Text  textString  `json:"text"`
	Num   json.Number `json:"num"`
}

type goPathRoot struct {
	Pad   int64        `json:"pad"`
	Leaf  goPathLeaf   `json:"leaf"`
	Ptr   *goPathLeaf  `json:"ptr"`
	PP    **goPathLeaf `json:"pp"`
	Zero  goPathLeaf   `json:"zero,omitzero"`
	Iface any          `json:"iface"`
	Map   map[string]string
	List  []goPathLeaf `json:"list"`
	Emb   embedded     `json:"emb"`
	PM    ptrMarshaler `json:"pm"`
}

func TestGoPathMatchesLookupGoString(t *testing.T) {
	str := "p"
	empty := ""
	leaf := goPathLeaf{S: "s", Named: "n", Omit: "o", PS: &str, Text: "t", Num: "1.5"}
	emptyLeaf := goPathLeaf{PS: &empty}
	leafPtr := &leaf
	full := goPathRoot{Pad: 1, Leaf: leaf, Ptr: &leaf, PP: &leafPtr, Zero: leaf, Iface: leaf, Map: map[string]string{"s": "m"}, List: []goPathLeaf{leaf}}
	bare := goPathRoot{Leaf: emptyLeaf, PP: new(*goPathLeaf), Iface: &leaf}
	str2 := "direct"
	api := events.APIGatewayProxyRequest{Body: `{"order_id":"o"}`}
	api.RequestContext.Identity.SourceIP = "203.0.113.7"
	values := []any{
		&full, &bare, full, &api, api, &str2, str2, nil, (*goPathRoot)(nil), &leafPtr, map[string]any{"leaf": map[string]any{"s": "x"}},
	}
	// direct holds the paths a pointer to goPathRoot reads without
	// reflection: plain strings through plain structs and pointers.
	direct := map[string]bool{}
	var rootPaths []string
	for _, first := range []string{"leaf", "ptr", "pp", "zero", "iface", "Map", "list.0", "emb", "pm", "missing"} {
		for _, last := range []string{"s", "named", "omit", "ps", "text", "num", "name", "ptr", "missing"} {
			p := first + "." + last
			rootPaths = append(rootPaths, p)
			direct[p] = slices.Contains([]string{"leaf", "ptr", "pp"}, first) && slices.Contains([]string{"s", "named", "omit", "ps"}, last)
		}
	}
	for _, p := range append(rootPaths, "", "pad", "leaf", "body", "requestContext.identity.sourceIp", "headers.Accept", "Map.s") {
		path := NewGoPath(parsePath(p))
		assert.Equal(t, direct[p], compileGoAccess(reflect.TypeFor[*goPathRoot](), path.path).direct, "%s is direct", p)
		// Twice over, so that each value also meets the accessor of
		// another type, and its own from the cache.
		for range 2 {
			for i, v := range values {
				s, isString, other, err := path.LookupString(v)
				ws, wIsString, wOther, wErr := LookupGoString(v, path.path)
				where := fmt.Sprintf("%s in value %d (%T)", p, i, v)
				require.Equal(t, wErr, err, where)
				assert.Equal(t, wIsString, isString, where)
				assert.Equal(t, ws, s, where)
				assert.Equal(t, wOther, other, where)
			}
		}
	}
	assert.True(t, compileGoAccess(reflect.TypeFor[*events.APIGatewayProxyRequest](), parsePath("body")).direct)
	assert.True(t, compileGoAccess(reflect.TypeFor[*events.APIGatewayProxyRequest](), parsePath("requestContext.identity.sourceIp")).direct)
	assert.True(t, compileGoAccess(reflect.TypeFor[*string](), nil).direct)
	assert.False(t, compileGoAccess(reflect.TypeFor[events.APIGatewayProxyRequest](), parsePath("body")).direct, "not a pointer")
}

func TestGoPathConcurrentTypes(t *testing.T) {
	path := NewGoPath(parsePath("body"))
	api := &events.APIGatewayProxyRequest{Body: "api"}
	sqs := &events.SQSMessage{Body: "sqs"}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 1000 {
				v, want := any(api), "api"
				if i%2 == 1 {
					v, want = sqs, "sqs"
				}
				s, ok, _, err := path.LookupString(v)
				if err != nil || !ok || s != want {
					t.Errorf("LookupString = %q, %v, %v; want %q", s, ok, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestGoPathDoesNotAllocate(t *testing.T) {
	path := NewGoPath(parsePath("body"))
	api := &events.APIGatewayProxyRequest{Body: `{"order_id":"o"}`}
	allocs := testing.AllocsPerRun(100, func() {
		if s, ok, _, _ := path.LookupString(api); !ok || s != api.Body {
			t.Fatalf("LookupString = %q, %v", s, ok)
		}
	})
	if allocs > 0 {
		t.Errorf("LookupString allocates %.0f times per call, want 0", allocs)
	}
}
