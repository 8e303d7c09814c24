package jmespath

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	jp "github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/functions"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// MaxDecompressedSize caps what powertools_base64_gzip inflates, so that a
// small compressed payload cannot exhaust the function's memory (a gzip
// bomb). It is larger than any Lambda payload can legitimately carry.
const MaxDecompressedSize = 16 << 20

// Errors of the Powertools functions, wrapped in the *SearchError that a
// search returns. Match them with errors.Is.
var (
	// ErrInvalidJSON: the input, or a string given to powertools_json, is
	// not valid JSON.
	ErrInvalidJSON = errors.New("jmespath: not valid JSON")
	// ErrInvalidBase64: a string given to powertools_base64 or
	// powertools_base64_gzip is not valid standard base64.
	ErrInvalidBase64 = errors.New("jmespath: not valid base64")
	// ErrInvalidGzip: the decoded bytes given to powertools_base64_gzip are
	// not a gzip stream.
	ErrInvalidGzip = errors.New("jmespath: not valid gzip")
	// ErrTooLarge: powertools_base64_gzip would inflate beyond
	// MaxDecompressedSize.
	ErrTooLarge = fmt.Errorf("jmespath: decompressed data exceeds %d bytes", MaxDecompressedSize)
	// ErrNotText: decoded bytes are not valid UTF-8 text.
	ErrNotText = errors.New("jmespath: decoded data is not UTF-8 text")
)

// Each function takes one string. Unlike Powertools, a null argument gives
// null instead of an error, so that a missing field (no body, say) reads as
// a missing key rather than as a malformed event.
var stringArg = []functions.ArgSpec{{Types: []functions.JpType{functions.JpAny}}}

// textArg returns a function's string argument, or ok=false for null.
func textArg(name string, arg any) (s string, ok bool, err error) {
	switch v := arg.(type) {
	case nil:
		return "", false, nil
	case string:
		return v, true, nil
	default:
		return "", false, fmt.Errorf("%s: expects a string, got %s", name, jsonType(v))
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// powertoolsFunctions are the Powertools functions, with the same names and meaning
// as in Powertools for AWS Lambda (Python and TypeScript).
var powertoolsFunctions = []jp.FunctionEntry{
	{Name: "powertools_json", Arguments: stringArg, Handler: handler("powertools_json", decodeJSON)},
	{Name: "powertools_base64", Arguments: stringArg, Handler: handler("powertools_base64", base64Text)},
	{Name: "powertools_base64_gzip", Arguments: stringArg, Handler: handler("powertools_base64_gzip", base64GzipText)},
}

// handler returns the interpreter's function for fn, which is named name.
func handler(name string, fn func(string) (any, error)) jp.JpFunction {
	return func(args []any) (any, error) {
		s, ok, err := textArg(name, args[0])
		if !ok {
			return nil, err
		}
		v, err := fn(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return v, nil
	}
}

// decodeJSON decodes a string that holds JSON, as API Gateway's body or an
// SQS message body does.
func decodeJSON(s string) (any, error) {
	v, err := parseJSON([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return v, nil
}

// base64Text decodes standard base64 into a string, as Kinesis record data
// and base64-encoded bodies need.
func base64Text(s string) (any, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, ErrNotText
	}
	return string(b), nil
}

// base64GzipText decodes base64, then gunzips, as CloudWatch Logs
// subscription data needs.
func base64GzipText(s string) (any, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidGzip, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxDecompressedSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidGzip, err)
	}
	if len(out) > MaxDecompressedSize {
		return nil, ErrTooLarge
	}
	if !utf8.Valid(out) {
		return nil, ErrNotText
	}
	return string(out), nil
}

func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBase64, err)
	}
	return b, nil
}

// knownFunctions maps every function an expression may call to its
// argument specification, so that Compile can reject unknown functions and
// wrong argument counts at start-up instead of on the first request. It is
// built on the first Compile, not in the package's init: a program that
// imports the package (every user of the idempotency package does) but
// compiles no expression does not pay for it at its cold start.
var knownFunctions = sync.OnceValue(func() map[string][]functions.ArgSpec {
	known := make(map[string][]functions.ArgSpec)
	for _, f := range functions.GetDefaultFunctions() {
		known[f.Name] = f.Arguments
	}
	for _, f := range powertoolsFunctions {
		known[f.Name] = f.Arguments
	}
	return known
})

func checkFunctions(node parsing.ASTNode) error {
	if node.NodeType == parsing.ASTFunctionExpression {
		name, _ := node.Value.(string)
		spec, ok := knownFunctions()[name]
		if !ok {
			return fmt.Errorf("unknown function %s()", name)
		}
		if err := checkArity(name, spec, len(node.Children)); err != nil {
			return err
		}
	}
	for _, child := range node.Children {
		if err := checkFunctions(child); err != nil {
			return err
		}
	}
	return nil
}

func checkArity(name string, spec []functions.ArgSpec, count int) error {
	required, variadic := 0, false
	for _, a := range spec {
		if !a.Optional {
			required++
		}
		variadic = variadic || a.Variadic
	}
	switch {
	case count < required:
		return fmt.Errorf("%s() takes at least %d arguments, got %d", name, required, count)
	case !variadic && count > len(spec):
		return fmt.Errorf("%s() takes at most %d arguments, got %d", name, len(spec), count)
	}
	return nil
}
