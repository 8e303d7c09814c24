// Package jmespath compiles the JMESPath expressions that select idempotency
// keys and validated payloads from an input. It registers the functions of
// Powertools for AWS Lambda (powertools_json, powertools_base64,
// powertools_base64_gzip). So expressions written for Powertools work
// unchanged.
//
// It is built on github.com/jmespath-community/go-jmespath, the maintained
// fork of go-jmespath that can register custom functions (the original
// cannot, so it cannot run powertools_json). Compile an expression once, at
// start-up, and search it many times.
//
// An Expression searches a Go value as encoding/json encodes it
// (SearchValue), a JSON document (SearchJSON) or a generic value (Search).
// The result is always the interpreter's on the input as encoding/json
// produces it. Numbers are exact: a number that a float64 cannot hold
// exactly (a large integer ID, say) is a json.Number, others are float64.
//
// Some expressions are evaluated without the interpreter and without
// converting the whole input (see plan). They are the expressions keys are
// made of: chains of members, indexes and Powertools functions, and lists
// or hashes of them.
package jmespath

import (
	"encoding/json"
	"errors"
	"fmt"

	jp "github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"

	"github.com/retrysafe/retrysafe/internal/canonical"
)

// Expression is a compiled JMESPath expression. It is safe for concurrent
// use.
type Expression struct {
	text           string
	compiled       jp.JMESPath
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
	return &Expression{text: expression, compiled: compiled, orderDependent: orderDependent(ast), plan: newPlan(ast)}, nil
}

// OrderDependent reports whether the expression's result may depend on the
// order of an object's members. That is so when it lists an object's
// values with a value projection (headers.*, *.id). It is so too when it
// calls keys(), values() or items(). Go maps have no order, so such an
// expression can give different results for one input. It must not be
// used to derive a key.
func (e *Expression) OrderDependent() bool { return e.orderDependent }

// orderedFunctions list object members in the object's order.
var orderedFunctions = map[string]bool{"keys": true, "values": true, "items": true}

func orderDependent(node parsing.ASTNode) bool {
	name, _ := node.Value.(string)
	if node.NodeType == parsing.ASTValueProjection || node.NodeType == parsing.ASTFunctionExpression && orderedFunctions[name] {
		return true
	}
	for _, child := range node.Children {
		if orderDependent(child) {
			return true
		}
	}
	return false
}

// String returns the expression's source text.
func (e *Expression) String() string { return e.text }

// Search evaluates the expression against data, a generic JSON value
// (map[string]any, []any, string, float64, json.Number, bool or nil), as
// encoding/json decodes into an any.
func (e *Expression) Search(data any) (any, error) {
	if e.plan != nil {
		return e.plan.eval(e, input{generic: data})
	}
	return e.interpret(data)
}

// interpret runs the interpreter on data.
func (e *Expression) interpret(data any) (result any, err error) {
	defer func() {
		// The interpreter is not ours; a panic on odd input must not take
		// the invocation down with it.
		if r := recover(); r != nil {
			result, err = nil, &SearchError{Expression: e.text, Err: fmt.Errorf("%v", r)}
		}
	}()
	result, err = e.compiled.Search(data)
	if err != nil {
		return nil, &SearchError{Expression: e.text, Err: err}
	}
	return result, nil
}

// SearchJSON evaluates the expression against a JSON document, which must
// be valid JSON as a whole: otherwise the error wraps ErrInvalidJSON.
func (e *Expression) SearchJSON(doc []byte) (any, error) {
	if e.plan != nil {
		if !json.Valid(doc) {
			_, err := canonical.Parse(doc)
			return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
		}
		return e.plan.eval(e, input{doc: doc, isDoc: true})
	}
	data, err := parseJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return e.interpret(data)
}

// SearchValue evaluates the expression against v as encoding/json encodes
// it: json.Marshal(v). A plan reads only the members on its paths, with
// encoding/json's rules. It encodes only what they reach. So some errors
// that json.Marshal would report are not reported. These are errors for a
// part of v that the expression does not read, such as a NaN or a
// MarshalJSON method that fails.
func (e *Expression) SearchValue(v any) (any, error) {
	if e.plan != nil {
		result, err := e.plan.eval(e, input{goValue: v, isGo: true})
		if err != errSlow {
			return result, err
		}
	}
	data, err := canonical.FromGo(v)
	if err != nil {
		return nil, fmt.Errorf("jmespath: converting %T: %w", v, err)
	}
	return e.interpret(exactNumbers(data))
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
