package jmespath

import (
	"github.com/jmespath-community/go-jmespath/pkg/parsing"

	"github.com/retrysafe/retrysafe/internal/jsonvalue"
)

// reads works out, from an expression's syntax tree, which members of the
// input the expression can read, so that SearchValue and SearchJSON convert
// only those. The analysis is conservative: whenever a value's whole content
// may matter (it is compared, passed to a function, returned, or reached in
// a way the analysis does not follow), the whole value is selected.
//
// It also reports whether the result may depend on the order of an
// object's members, which Go maps do not keep.
func reads(ast parsing.ASTNode) (sel *jsonvalue.Selection, orderDependent bool) {
	a := analysis{root: jsonvalue.NewSelection()}
	a.use(a.eval(ast, a.root))
	return a.root, a.orderDependent
}

// orderedFunctions list object members in the object's order.
var orderedFunctions = map[string]bool{"keys": true, "values": true, "items": true}

type analysis struct {
	root           *jsonvalue.Selection
	orderDependent bool
}

// use marks a value as needed in full.
func (a *analysis) use(s *jsonvalue.Selection) {
	if s != nil {
		s.SelectAll()
	}
}

// eval follows node evaluated against the value that cur selects, and
// returns the selection of the value node evaluates to when that value is a
// part of the input (so that what follows can narrow it), or nil when the
// value is computed, after marking in full whatever it was computed from.
// Arrays are transparent: a projection's elements share their array's
// selection.
func (a *analysis) eval(node parsing.ASTNode, cur *jsonvalue.Selection) *jsonvalue.Selection {
	child := func(i int) parsing.ASTNode { return node.Children[i] }
	switch node.NodeType {
	case parsing.ASTField:
		if cur == nil {
			return nil
		}
		name, _ := node.Value.(string)
		return cur.Field(name)
	case parsing.ASTCurrentNode, parsing.ASTIdentity, parsing.ASTIndex, parsing.ASTSlice:
		return cur
	case parsing.ASTRootNode:
		return a.root
	case parsing.ASTSubexpression, parsing.ASTIndexExpression, parsing.ASTPipe, parsing.ASTProjection:
		return a.eval(child(1), a.eval(child(0), cur))
	case parsing.ASTFlatten:
		return a.eval(child(0), cur)
	case parsing.ASTValueProjection:
		// The values of an object: every member, in the object's order.
		a.orderDependent = true
		left := a.eval(child(0), cur)
		a.use(left)
		return a.eval(child(1), left)
	case parsing.ASTFilterProjection:
		left := a.eval(child(0), cur)
		a.use(a.eval(child(2), left))
		return a.eval(child(1), left)
	case parsing.ASTLiteral:
		return nil
	case parsing.ASTMultiSelectHash:
		for _, pair := range node.Children {
			a.use(a.eval(pair.Children[0], cur))
		}
		return nil
	case parsing.ASTMultiSelectList, parsing.ASTOrExpression, parsing.ASTAndExpression,
		parsing.ASTNotExpression, parsing.ASTComparator,
		parsing.ASTArithmeticExpression, parsing.ASTArithmeticUnaryExpression:
		for _, c := range node.Children {
			a.use(a.eval(c, cur))
		}
		return nil
	case parsing.ASTFunctionExpression:
		if name, _ := node.Value.(string); orderedFunctions[name] {
			a.orderDependent = true
		}
		for _, arg := range node.Children {
			if arg.NodeType == parsing.ASTExpRef {
				// An expression reference runs on elements of the other
				// arguments, which are selected in full; only a reference to
				// the root ($) can reach further.
				a.use(a.eval(arg.Children[0], nil))
				continue
			}
			a.use(a.eval(arg, cur))
		}
		return nil
	case parsing.ASTExpRef:
		a.use(a.eval(child(0), nil))
		return nil
	default:
		// let expressions, variables and anything newer: read everything.
		a.root.SelectAll()
		return nil
	}
}
