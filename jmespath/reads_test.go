package jmespath

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReads(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"body", `{"body"}`},
		{"powertools_json(body).order_id", `{"body"}`},
		{"requestContext.identity.sourceIp", `{"requestContext":{"identity":{"sourceIp"}}}`},
		{"[httpMethod, path]", `{"httpMethod" "path"}`},
		{"{m: httpMethod, b: powertools_json(body).id}", `{"httpMethod" "body"}`},
		{"Records[*].messageId", `{"Records":{"messageId"}}`},
		{"Records[?eventSource == 'aws:sqs'].body", `{"Records":{"eventSource" "body"}}`},
		{"keys(headers)", `{"headers"}`},
		{"headers.*", `{"headers"}`},
		{"sort_by(Records, &attributes.SentTimestamp)[0].body", `{"Records"}`},
		{"@", `*`},
		{"$.path", `{"path"}`},
		{"map(&$.x, Records)", `{"x" "Records"}`},
		{"let $a = path in $a", `*`},
		{"`1`", `{}`},
	} {
		e, err := Compile(tc.expr)
		if !assert.NoError(t, err, tc.expr) {
			continue
		}
		assert.Equal(t, tc.want, e.reads.String(), tc.expr)
	}
}

func TestOrderDependent(t *testing.T) {
	for expr, want := range map[string]bool{
		"headers.*": true, "*.Accept": true, "keys(headers)": true, "values(@)": true, "items(a)": true,
		"body": false, "Records[*].body": false, "to_string(headers)": false, "length(keys(headers))": true,
		"sort(keys(headers))": true, "[a, b]": false,
	} {
		assert.Equal(t, want, MustCompile(expr).OrderDependent(), expr)
	}
}
