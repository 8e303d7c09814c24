// Package jmespath compiles the JMESPath expressions that select idempotency
// keys and validated payloads from an input, with the functions of
// Powertools for AWS Lambda (powertools_json, powertools_base64,
// powertools_base64_gzip) registered, so expressions written for Powertools
// work unchanged.
//
// It is built on github.com/jmespath-community/go-jmespath, the maintained
// fork of go-jmespath that can register custom functions (the original
// cannot, so it cannot run powertools_json). Compile an expression once, at
// start-up, and search it many times.
//
// An Expression searches any Go value as encoding/json would encode it
// (SearchValue) or raw JSON (SearchJSON) without decoding the whole input:
// at compile time it works out which members of the input the expression
// can read, and only those are converted. Numbers are exact: a number that
// a float64 cannot hold exactly (a large integer ID, say) stays a
// json.Number.
package jmespath

import (
	"errors"
	"fmt"

	jp "github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"

	"github.com/retrysafe/retrysafe/internal/jsonvalue"
)

// Expression is a compiled JMESPath expression. It is safe for concurrent
// use.
type Expression struct {
	text           string
	compiled       jp.JMESPath
	reads          *jsonvalue.Selection
	orderDependent bool
	plan           *plan // nil unless the expression is simple
}

// ErrInvalidExpression is matched (with errors.Is) by the errors Compile
// returns.
var ErrInvalidExpression = errors.New("jmespath: invalid expression")

// CompileError reports an expression that does not parse.
type CompileError struct {
	Expression string
	Err        error // the parser's error, a jp.SyntaxError when it has a position
}

// Error implements error.
func (e *CompileError) Error() string {
	return fmt.Sprintf("jmespath: invalid expression %q: %v", e.Expression, e.Err)
}

// Unwrap returns the underlying error.
func (e *CompileError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalidExpression) true.
func (e *CompileError) Is(target error) bool { return target == ErrInvalidExpression }

// Compile parses expression. The error, if any, is a *CompileError.
func Compile(expression string) (*Expression, error) {
	if expression == "" {
		return nil, &CompileError{Expression: expression, Err: errors.New("empty expression")}
	}
	ast, err := parsing.NewParser().Parse(expression)
	if err != nil {
		return nil, &CompileError{Expression: expression, Err: err}
	}
	if err := checkFunctions(ast); err != nil {
		return nil, &CompileError{Expression: expression, Err: err}
	}
	compiled, err := jp.Compile(expression, powertoolsFunctions...)
	if err != nil {
		return nil, &CompileError{Expression: expression, Err: err}
	}
	sel, orderDependent := reads(ast)
	return &Expression{text: expression, compiled: compiled, reads: sel, orderDependent: orderDependent, plan: newPlan(ast)}, nil
}

// MustCompile is like Compile but panics if the expression does not parse.
// It simplifies the initialisation of package-level variables.
func MustCompile(expression string) *Expression {
	e, err := Compile(expression)
	if err != nil {
		panic(err)
	}
	return e
}

// OrderDependent reports whether the expression's result may depend on the
// order of an object's members: it lists an object's values with a value
// projection (headers.*, *.id) or calls keys(), values() or items(). Go maps
// have no order, so such an expression can give different results for one
// input, and must not be used to derive a key.
func (e *Expression) OrderDependent() bool { return e.orderDependent }

// String returns the expression's source text.
func (e *Expression) String() string { return e.text }

// Search evaluates the expression against data, a generic JSON value
// (map[string]any, []any, string, float64, json.Number, bool or nil), as
// encoding/json decodes into an any.
func (e *Expression) Search(data any) (result any, err error) {
	if e.plan != nil {
		return e.plan.eval(e, input{generic: data, kind: genericInput})
	}
	defer func() {
		// The interpreter is not ours; a panic on odd input must not take
		// the invocation down with it.
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("jmespath: evaluating %q: %v", e.text, r)
		}
	}()
	result, err = e.compiled.Search(data)
	if err != nil {
		return nil, &SearchError{Expression: e.text, Err: err}
	}
	return result, nil
}

// SearchJSON evaluates the expression against a JSON document. Only the
// parts of the document the expression can read are decoded, but the whole
// document must be valid JSON.
func (e *Expression) SearchJSON(doc []byte) (any, error) {
	if e.plan != nil {
		return e.plan.eval(e, input{doc: doc, kind: jsonInput})
	}
	data, err := e.ParseJSON(doc)
	if err != nil {
		return nil, err
	}
	return e.Search(data)
}

// SearchValue evaluates the expression against v as encoding/json would
// encode it. Only the parts of v the expression can read are converted.
func (e *Expression) SearchValue(v any) (any, error) {
	if e.plan != nil {
		return e.plan.eval(e, input{goValue: v, kind: goInput})
	}
	data, err := e.Value(v)
	if err != nil {
		return nil, err
	}
	return e.Search(data)
}

// AppendCanonical evaluates the expression against v, as SearchValue does,
// and appends the canonical JSON encoding of the result to dst: object
// members sorted by name, numbers in one normal form (1, 1.0 and 1e0 are
// one number), strings with one escaping, no spaces. Equal results give
// equal bytes; idempotency keys are hashed from them. For the usual key
// expression, powertools_json(body).order_id with a string order_id, it
// does not allocate.
func (e *Expression) AppendCanonical(dst []byte, v any) ([]byte, error) {
	if e.plan != nil {
		if out, done, err := e.plan.appendCanonical(e, dst, v); done {
			return out, err
		}
	}
	result, err := e.SearchValue(v)
	if err != nil {
		return dst, err
	}
	out, err := jsonvalue.AppendCanonical(dst, result)
	if err != nil {
		return dst, &SearchError{Expression: e.text, Err: err}
	}
	return out, nil
}

// ParseJSON decodes doc into the generic form Search takes, keeping only
// the parts the expression can read.
func (e *Expression) ParseJSON(doc []byte) (any, error) {
	data, err := jsonvalue.Decode(doc, e.reads)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return data, nil
}

// Value converts v into the generic form Search takes, as encoding/json
// would encode it, keeping only the parts the expression can read.
func (e *Expression) Value(v any) (any, error) {
	data, err := jsonvalue.FromGo(v, e.reads)
	if err != nil {
		return nil, fmt.Errorf("jmespath: converting %T: %w", v, err)
	}
	return data, nil
}

// SearchError reports an expression that failed while it was evaluated,
// for example a Powertools function given a value that does not decode.
type SearchError struct {
	Expression string
	Err        error
}

// Error implements error.
func (e *SearchError) Error() string {
	return fmt.Sprintf("jmespath: evaluating %q: %v", e.Expression, e.Err)
}

// Unwrap returns the underlying error.
func (e *SearchError) Unwrap() error { return e.Err }
