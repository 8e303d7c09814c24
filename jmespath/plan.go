package jmespath

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// A plan evaluates a simple expression without the interpreter, reading
// only the values on its paths. Simple expressions are the ones keys are
// made of: chains of members, indexes and Powertools functions
// ("powertools_json(body).order_id", "Records[0].messageId",
// "powertools_json(powertools_base64(data)).id"), or a multi-select list or
// hash of such chains ("[customer, order_id]"). Everything else goes to the
// interpreter.
//
// On a Go value, a chain's first path is followed with reflect (see
// followGo), and only the value it reaches is encoded. On JSON, the text is
// checked once and only the value a path reaches is decoded.
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
	paths [][]step
	fns   []function
}

// A function is a Powertools function in a chain.
type function struct {
	name string
	fn   func(string) (any, error) // nil for powertools_json, which the chain runs itself
}

// A step is a member name or an index.
type step struct {
	name    string
	key     reflect.Value // name, as a map key
	plain   bool          // name is valid UTF-8 without U+FFFD
	index   int
	isIndex bool
}

func memberStep(name string) step {
	return step{name: name, key: reflect.ValueOf(name), plain: utf8.ValidString(name) && !strings.ContainsRune(name, utf8.RuneError)}
}

// newPlan returns a plan for ast, or nil if the expression is not simple.
func newPlan(ast parsing.ASTNode) *plan {
	p := &plan{}
	nodes := []parsing.ASTNode{ast}
	switch ast.NodeType {
	case parsing.ASTMultiSelectList:
		p.shape, nodes = list, ast.Children
	case parsing.ASTMultiSelectHash:
		p.shape, nodes = hash, nil
		for _, pair := range ast.Children {
			name, ok := pair.Value.(string)
			if !ok {
				return nil
			}
			p.names = append(p.names, name)
			nodes = append(nodes, pair.Children[0])
		}
	}
	for _, node := range nodes {
		c, ok := linearize(node, chain{paths: [][]step{nil}})
		if !ok {
			return nil
		}
		p.chains = append(p.chains, c)
	}
	return p
}

var planFunctions = map[string]func(string) (any, error){
	"powertools_json":        nil,
	"powertools_base64":      base64Text,
	"powertools_base64_gzip": base64GzipText,
}

// linearize appends node's steps to c.
func linearize(node parsing.ASTNode, c chain) (chain, bool) {
	last := len(c.paths) - 1
	switch node.NodeType {
	case parsing.ASTField:
		name, ok := node.Value.(string)
		c.paths[last] = append(c.paths[last], memberStep(name))
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
		c.paths[last] = append(c.paths[last], step{index: i, isIndex: true})
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
		c.fns = append(c.fns, function{name: name, fn: fn})
		c.paths = append(c.paths, nil)
		return c, true
	}
	return c, false
}

// input is what a plan runs on: a Go value, a JSON document already known
// to be valid, or a generic value.
type input struct {
	goValue any
	doc     []byte
	generic any
	isGo    bool
	isDoc   bool
}

// errSlow is a plan's answer for a Go value whose encoding it does not
// follow: the expression then runs on the value's encoding.
var errSlow = errors.New("jmespath: not planned for this value")

func (p *plan) eval(e *Expression, in input) (any, error) {
	if p.shape == single {
		return p.chains[0].eval(e, in)
	}
	// The interpreter builds a multi-select even on null, so the plan does
	// too.
	results := make([]any, len(p.chains))
	for i := range p.chains {
		v, err := p.chains[i].eval(e, in)
		if err != nil {
			return nil, err
		}
		results[i] = v
	}
	if p.shape == list {
		return results, nil
	}
	out := make(map[string]any, len(p.chains))
	for i, name := range p.names {
		out[name] = results[i]
	}
	return out, nil
}

func (c *chain) eval(e *Expression, in input) (any, error) {
	var cur cursor
	switch {
	case in.isGo:
		leaf, ok := followGo(reflect.ValueOf(in.goValue), c.paths[0])
		if !ok {
			return nil, errSlow
		}
		var err error
		if cur.s, cur.isString = goString(leaf); !cur.isString {
			if cur.v, err = goLeaf(leaf); err != nil {
				return nil, fmt.Errorf("jmespath: converting %T: %w", in.goValue, err)
			}
		}
	case in.isDoc:
		cur.raw = in.doc
	default:
		cur.v = in.generic
	}
	if !in.isGo {
		cur = cur.follow(c.paths[0])
	}
	for i, f := range c.fns {
		s, ok := cur.s, cur.isString
		if !ok {
			arg, err := cur.value()
			if err != nil {
				return nil, err
			}
			if s, ok, err = textArg(f.name, arg); err != nil {
				return nil, &SearchError{Expression: e.text, Err: err}
			}
		}
		if !ok {
			// A Powertools function gives null for null, and the rest of
			// the chain null too.
			return nil, nil
		}
		var err error
		if cur = (cursor{}); f.fn == nil {
			// powertools_json: check the text, and decode only what the
			// path after it reaches.
			if cur.raw = []byte(s); !json.Valid(cur.raw) {
				_, err = decodeJSON(s)
			}
		} else {
			cur.v, err = f.fn(s)
		}
		if err != nil {
			return nil, &SearchError{Expression: e.text, Err: fmt.Errorf("%s: %w", f.name, err)}
		}
		cur = cur.follow(c.paths[i+1])
	}
	return cur.value()
}

// A cursor is a value a chain has reached: the text of a JSON value known
// to be valid (raw), a string (s, when isString), or else a generic value
// (v).
type cursor struct {
	raw      []byte
	s        string
	isString bool
	v        any
}

func (c cursor) follow(path []step) cursor {
	for _, s := range path {
		switch {
		case c.isString:
			return cursor{} // a string has no members or elements
		case c.raw != nil && s.isIndex:
			c.raw = element(c.raw, s.index)
		case c.raw != nil:
			c.raw = member(c.raw, s)
		case s.isIndex:
			a, _ := c.v.([]any)
			i := s.index
			if i < 0 {
				i += len(a)
			}
			c.v = nil
			if i >= 0 && i < len(a) {
				c.v = a[i]
			}
		default:
			m, _ := c.v.(map[string]any)
			c.v = m[s.name]
		}
	}
	return c
}

// value returns the value c is at.
func (c cursor) value() (any, error) {
	switch {
	case c.isString:
		return c.s, nil
	case c.raw != nil:
		return decodeValue(c.raw)
	}
	return c.v, nil
}
