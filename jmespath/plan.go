package jmespath

import (
	"fmt"

	"github.com/jmespath-community/go-jmespath/pkg/parsing"

	"github.com/retrysafe/retrysafe/internal/jsonvalue"
)

// A plan evaluates a simple expression without the interpreter, reading
// only the values on its paths. Simple expressions are the ones keys are
// made of: chains of members, indexes and Powertools functions
// ("powertools_json(body).order_id", "Records[0].messageId",
// "powertools_json(powertools_base64(data)).id"), or a multi-select list or
// hash of such chains ("[customer, order_id]"). Everything else goes to the
// interpreter.
type plan struct {
	chains []chain
	// shape is how the chains' results are returned: one result, a list,
	// or a hash with keys names.
	shape shape
	names []string
}

type shape int

const (
	single shape = iota
	list
	hash
)

// A chain follows paths[0], then applies fns[i] and follows paths[i+1], in
// turn: a JMESPath chain, since each step applies to the previous one's
// result.
type chain struct {
	paths [][]jsonvalue.Step
	fns   []func([]any) (any, error)
	json  []bool // fns[i] is powertools_json, which plan fuses with the path after it
	// text is paths[0] compiled for Go values, when fns[0] is
	// powertools_json: the path to the JSON text of the usual key.
	text *jsonvalue.GoPath
}

// newPlan returns a plan for ast, or nil if the expression is not simple.
func newPlan(ast parsing.ASTNode) *plan {
	switch ast.NodeType {
	case parsing.ASTMultiSelectList:
		p := &plan{shape: list}
		for _, child := range ast.Children {
			c, ok := linearize(child, chain{paths: [][]jsonvalue.Step{nil}})
			if !ok {
				return nil
			}
			p.chains = append(p.chains, c.compiled())
		}
		return p
	case parsing.ASTMultiSelectHash:
		p := &plan{shape: hash}
		for _, pair := range ast.Children {
			c, ok := linearize(pair.Children[0], chain{paths: [][]jsonvalue.Step{nil}})
			name, isString := pair.Value.(string)
			if !ok || !isString {
				return nil
			}
			p.chains = append(p.chains, c.compiled())
			p.names = append(p.names, name)
		}
		return p
	}
	c, ok := linearize(ast, chain{paths: [][]jsonvalue.Step{nil}})
	if !ok {
		return nil
	}
	return &plan{chains: []chain{c.compiled()}}
}

// compiled returns c ready to run.
func (c chain) compiled() chain {
	if len(c.fns) > 0 && c.json[0] {
		c.text = jsonvalue.NewGoPath(c.paths[0])
	}
	return c
}

// linearize appends node's steps to c.
func linearize(node parsing.ASTNode, c chain) (chain, bool) {
	last := len(c.paths) - 1
	switch node.NodeType {
	case parsing.ASTField:
		name, ok := node.Value.(string)
		c.paths[last] = append(c.paths[last], jsonvalue.Member(name))
		return c, ok
	case parsing.ASTIdentity, parsing.ASTCurrentNode:
		return c, true
	case parsing.ASTIndexExpression:
		c, ok := linearize(node.Children[0], c)
		if !ok || node.Children[1].NodeType != parsing.ASTIndex {
			return c, false
		}
		i, isInt := node.Children[1].Value.(int)
		last = len(c.paths) - 1
		c.paths[last] = append(c.paths[last], jsonvalue.Element(i))
		return c, isInt
	case parsing.ASTSubexpression, parsing.ASTPipe:
		c, ok := linearize(node.Children[0], c)
		if !ok {
			return c, false
		}
		return linearize(node.Children[1], c)
	case parsing.ASTFunctionExpression:
		name, _ := node.Value.(string)
		fn, ok := planFunctions[name]
		if !ok || len(node.Children) != 1 {
			return c, false
		}
		if c, ok = linearize(node.Children[0], c); !ok {
			return c, false
		}
		c.fns = append(c.fns, fn)
		c.json = append(c.json, name == "powertools_json")
		c.paths = append(c.paths, nil)
		return c, true
	}
	return c, false
}

var planFunctions = map[string]func([]any) (any, error){
	"powertools_json":        powertoolsJSON,
	"powertools_base64":      powertoolsBase64,
	"powertools_base64_gzip": powertoolsBase64Gzip,
}

// input is what a plan runs on: a Go value, a JSON document, or a generic
// value.
type input struct {
	goValue any
	doc     []byte
	generic any
	kind    int
}

const (
	goInput = iota
	jsonInput
	genericInput
)

func (p *plan) eval(e *Expression, in input) (any, error) {
	if p.shape == single {
		return p.chains[0].eval(e, in)
	}
	// The interpreter builds a multi-select even on null, so the plan does
	// too.
	if p.shape == list {
		out := make([]any, len(p.chains))
		for i := range p.chains {
			v, err := p.chains[i].eval(e, in)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	out := make(map[string]any, len(p.chains))
	for i := range p.chains {
		v, err := p.chains[i].eval(e, in)
		if err != nil {
			return nil, err
		}
		out[p.names[i]] = v
	}
	return out, nil
}

func inputError(e *Expression, in input, err error) error {
	if in.kind == jsonInput {
		return fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return fmt.Errorf("jmespath: converting %T: %w", in.goValue, err)
}

func (c *chain) eval(e *Expression, in input) (any, error) {
	var cur any
	var err error
	switch {
	case in.kind == goInput && len(c.fns) > 0 && c.json[0]:
		// The usual key expression, powertools_json(body).id: read the
		// string without boxing it, and decode only what the path reaches.
		s, isString, other, err := c.text.LookupString(in.goValue)
		if err != nil {
			return nil, inputError(e, in, err)
		}
		if isString {
			if cur, err = decodeJSONPath(e, s, c.paths[1]); err != nil {
				return nil, err
			}
			return c.apply(e, cur, 1)
		}
		return c.apply(e, other, 0)
	case in.kind == goInput:
		cur, err = jsonvalue.LookupGo(in.goValue, c.paths[0])
	case in.kind == jsonInput:
		cur, err = jsonvalue.LookupJSON(in.doc, c.paths[0])
	default:
		cur = jsonvalue.Walk(in.generic, c.paths[0])
	}
	if err != nil {
		return nil, inputError(e, in, err)
	}
	return c.apply(e, cur, 0)
}

// apply applies the chain's functions from the first-th on, each followed
// by its path, to cur.
func (c *chain) apply(e *Expression, cur any, first int) (any, error) {
	for i := first; i < len(c.fns); i++ {
		rest := c.paths[i+1]
		if c.json[i] {
			// powertools_json followed by a path: decode only what the path
			// reaches.
			s, ok, err := textArg("powertools_json", cur)
			if err != nil {
				return nil, &SearchError{Expression: e.text, Err: err}
			}
			if !ok {
				cur = nil
				continue
			}
			if cur, err = decodeJSONPath(e, s, rest); err != nil {
				return nil, err
			}
			continue
		}
		var err error
		if cur, err = c.fns[i]([]any{cur}); err != nil {
			return nil, &SearchError{Expression: e.text, Err: err}
		}
		cur = jsonvalue.Walk(cur, rest)
	}
	return cur, nil
}

// decodeJSONPath is powertools_json(s) followed by path, decoding only the
// value the path reaches.
func decodeJSONPath(e *Expression, s string, path []jsonvalue.Step) (any, error) {
	v, err := jsonvalue.LookupJSONString(s, path)
	if err != nil {
		return nil, invalidJSONArg(e, err)
	}
	return v, nil
}

func invalidJSONArg(e *Expression, err error) error {
	return &SearchError{Expression: e.text, Err: fmt.Errorf("powertools_json: %w: %w", ErrInvalidJSON, err)}
}

// appendCanonical is Expression.AppendCanonical for the usual key
// expression, powertools_json(<path>).<path> on a Go value: the value the
// second path reaches is encoded straight from the JSON text, without
// being decoded into an any first. done is false for other expressions
// and inputs, which take the general way.
func (p *plan) appendCanonical(e *Expression, dst []byte, v any) (out []byte, done bool, err error) {
	if p.shape != single {
		return dst, false, nil
	}
	c := &p.chains[0]
	if len(c.fns) != 1 || !c.json[0] {
		return dst, false, nil
	}
	s, isString, _, err := c.text.LookupString(v)
	if err != nil {
		return dst, true, inputError(e, input{goValue: v, kind: goInput}, err)
	}
	if !isString {
		return dst, false, nil
	}
	if out, err = jsonvalue.AppendCanonicalAt(dst, s, c.paths[1]); err != nil {
		return dst, true, invalidJSONArg(e, err)
	}
	return out, true, nil
}
