package httpapi

import (
	"slices"
	"strings"
)

// Request is the adapter's view of an HTTP request, the same for every
// event type and for [Middleware]. Scope functions (see [WithScope]) read
// it.
type Request struct {
	// Method is the request's HTTP method in upper case.
	Method string

	// Path is the request path as the event carries it. It is path for API
	// Gateway REST APIs and ALB, and rawPath for HTTP APIs and Function
	// URLs. For Middleware, it is the escaped path of the URL.
	Path string

	// Event points to the event the adapter received. That is an
	// *events.APIGatewayProxyRequest, *events.APIGatewayV2HTTPRequest,
	// *events.LambdaFunctionURLRequest or *events.ALBTargetGroupRequest.
	// For Middleware, it is the *http.Request. Scope functions read
	// authorizer data from it. Treat it as read-only.
	Event any

	headers      map[string]string
	multiHeaders map[string][]string
	// query and multiQuery are the query string parameters as the event
	// carries them (multi-value where the event has them).
	query      map[string]string
	multiQuery map[string][]string
	body       string
	base64     bool
	// raw is the body that Middleware read (readBody), which body and
	// base64 stand for in events.
	raw      []byte
	readBody func() error
	// multiValueResponse is set when the response must carry its headers in
	// MultiValueHeaders: an ALB target group with multi-value headers on
	// ignores the single-value map.
	multiValueResponse bool
}

// queryValues returns the query string parameters as canonical JSON
// values: each name with the list of its values, from the multi-value
// parameters where the event has them (REST APIs, ALB with multi-value
// headers on). HTTP APIs and Function URLs join repeated parameters with
// commas into one value.
func (r *Request) queryValues() map[string]any {
	if len(r.multiQuery) > 0 {
		out := make(map[string]any, len(r.multiQuery))
		for name, values := range r.multiQuery {
			out[name] = anyList(values)
		}
		return out
	}
	if len(r.query) == 0 {
		return nil
	}
	out := make(map[string]any, len(r.query))
	for name, v := range r.query {
		out[name] = []any{v}
	}
	return out
}

// anyList returns values as the generic list that canonical.Append
// writes.
func anyList(values []string) []any {
	list := make([]any, len(values))
	for i, v := range values {
		list[i] = v
	}
	return list
}

// Values returns the values of the request header name, matched without
// regard to case. Where the event has multi-value headers, each header
// line is one value. REST APIs have them, and so does ALB with
// multi-value headers on. HTTP APIs and Function URLs join repeated lines
// with commas into one value. The result may share memory with the event,
// so do not modify it.
func (r *Request) Values(name string) []string {
	if vs := lookup(r.multiHeaders, name); len(vs) > 0 {
		return vs
	}
	return lookup(r.headers, name)
}

// Header returns the first value of the request header name, matched
// without regard to case, or "" if the request has no such header.
func (r *Request) Header(name string) string {
	if vs := r.Values(name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// lookup returns the values of the keys of m equal to name without regard
// to case. Events keep header names as the client spelled them, so one
// header can appear under several spellings; they are merged in sorted key
// order, so that the result does not depend on map iteration order.
func lookup[V string | []string](m map[string]V, name string) []string {
	var first string
	var more []string
	found := false
	for k := range m {
		if !strings.EqualFold(k, name) {
			continue
		}
		if !found {
			first, found = k, true
			continue
		}
		more = append(more, k)
	}
	if !found {
		return nil
	}
	if len(more) == 0 {
		return asValues(m[first])
	}
	keys := append(more, first)
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		out = append(out, asValues(m[k])...)
	}
	return out
}

func asValues[V string | []string](v V) []string {
	switch v := any(v).(type) {
	case string:
		return []string{v}
	case []string:
		return v
	}
	return nil
}
