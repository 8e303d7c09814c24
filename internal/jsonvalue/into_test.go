package jsonvalue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"
)

type plain struct {
	S     string             `json:"s"`
	I     int8               `json:"i"`
	U     uint16             `json:"u"`
	F     float32            `json:"f"`
	B     bool               `json:"b"`
	P     *int               `json:"p"`
	PP    **string           `json:"pp"`
	L     []string           `json:"l"`
	A     [2]int             `json:"a"`
	M     map[string][]int   `json:"m"`
	Named map[textKey2]int   `json:"named"`
	Bytes []byte             `json:"bytes"`
	Inner inner              `json:"inner"`
	Ptr   *inner             `json:"ptr"`
	Any   any                `json:"any"`
	Num   json.Number        `json:"num"`
	Raw   json.RawMessage    `json:"raw"`
	Omit  string             `json:"omit,omitempty"`
	Deep  map[string]*plain  `json:"deep"`
	Keys  map[myString]myInt `json:"keys"`
}

type textKey2 string

type myString string

type myInt int

func TestCodecDecodesAsEncodingJSON(t *testing.T) {
	one, s := 1, "s"
	ps := &s
	values := []any{
		plain{S: "é\n\"", I: -3, U: 7, F: 0.1, B: true, P: &one, PP: &ps, L: []string{"a"}, A: [2]int{1, 2},
			M: map[string][]int{"x": {1}, "y": nil}, Named: map[textKey2]int{"k": 1}, Bytes: []byte("hi"),
			Inner: inner{N: 4}, Ptr: &inner{N: 5}, Any: map[string]any{"n": 1.5}, Num: "12345678901234567890",
			Raw: json.RawMessage(`{"r":1}`), Deep: map[string]*plain{"d": {S: "deep"}, "nil": nil},
			Keys: map[myString]myInt{"k": 9}},
		plain{},
		sampleValue(),
		events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
			MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}}, Body: `{"id":"p_1"}`},
		events.APIGatewayV2HTTPResponse{StatusCode: 200, Cookies: []string{"c=1"}, Body: "x", IsBase64Encoded: true},
		events.ALBTargetGroupResponse{StatusCode: 404, StatusDescription: "404 Not Found"},
	}
	for _, v := range values {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		checkCodecsAsEncodingJSON(t, data)
	}
	for _, doc := range []string{
		`null`, `{}`, `[]`, `"str"`, `1`, `1.5`, `-0`, `true`, `{"s": null, "l": null, "p": null, "m": null}`,
		`{"S": "folded"}`, `{"s": 1}`, `{"i": 300}`, `{"i": 1.5}`, `{"u": -1}`, `{"f": 1e39}`, `{"l": [1]}`,
		`{"a": [1, 2, 3]}`, `{"a": [1]}`, `{"bytes": "!!"}`, `{"bytes": "aGk="}`, `{"bytes": "aGk\u003d"}`,
		`{"s": "a", "s": "b"}`, `{"m": {"x": [1], "x": [2]}}`, `[1, "x"]`, `{"unknown": {"deep": [1, {"a": null}]}}`,
		`{"num": "12"}`, `{"num": 12}`, `{"statusCode": "201"}`, `{"headers": {"a": 1}}`, `{"s": "\ud83d"}`,
		`{"s": "x"} trailing`, `{"s": `, `{"inner": {"n": 1}, "ptr": {"n": 2}}`, `{"keys": {"k": 1}}`,
		`{"emb": {"n": 1, "name": "e"}}`, `{"n": "1"}`, `{"p": 1, "pp": "x"}`, `{"deep": {"a": {"s": "x"}}}`,
	} {
		checkCodecsAsEncodingJSON(t, []byte(doc))
	}
}

func FuzzCodec(f *testing.F) {
	f.Add([]byte(`{"statusCode":201,"headers":{"a":"b"},"body":"x"}`))
	f.Add([]byte(`{"s":"x","l":["a"],"m":{"k":[1,2]},"bytes":"aGk=","a":[1,2,3]}`))
	f.Add([]byte(`[1,2]`))
	// Enough strings to fill more than one shared buffer, escaped ones
	// that grow (invalid UTF-8 becomes U+FFFD), and one too long to share.
	many := `{"statusCode":200,"headers":{`
	for i := range 60 {
		many += fmt.Sprintf(`"h%d":"v\u00e9\"%d`, i, i) + "\xff\xfe\","
	}
	many += `"long":"` + strings.Repeat(`x\n`, 200) + `"},"body":"\ud83d\ude00 ` + "\xff\"}"
	f.Add([]byte(many))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCodecsAsEncodingJSON(t, data)
	})
}

func TestCodecOfStoredResponses(t *testing.T) {
	for _, doc := range []string{
		`{"statusCode":201,"headers":{"a":"b"},"body":"x"}`, `{"statusCode":"bad"}`, `{"headers":{"a":1}}`, `null`, `[`,
	} {
		checkCodecsAsEncodingJSON(t, []byte(doc))
	}
}
