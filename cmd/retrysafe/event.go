package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-lambda-go/events"
)

// readEvent reads the event in the file named by args (stdin without
// one, or with "-") and checks that it is JSON. name says where it came
// from, for messages.
func readEvent(ctx context.Context, e *env, args []string) (event []byte, name string, err error) {
	switch {
	case len(args) > 1:
		return nil, "", usageError("one event at a time, not %d", len(args))
	case len(args) == 0 || args[0] == "-":
		name = "the event on stdin"
		if e.stdinTerminal {
			fmt.Fprintln(e.stderr, "reading the event from the terminal: type or paste it, then Ctrl-D (or give its file)")
		}
		event, err = readAll(ctx, e.stdin)
		if ctx.Err() != nil {
			return nil, "", err // interrupted: nothing to say
		}
	default:
		name = args[0]
		event, err = os.ReadFile(args[0])
	}
	if err != nil {
		return nil, "", usageError("reading %s: %v", name, err)
	}
	if err := checkJSON(event); err != nil {
		return nil, "", usageError("%s is not JSON: %v", name, err)
	}
	return event, name, nil
}

// checkJSON says why doc is not one JSON value, with the line and column
// of a syntax error.
func checkJSON(doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return errors.New("it is empty")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		err = errors.New("data after the value")
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		line, col := position(doc, syntax.Offset)
		return fmt.Errorf("%v (line %d, column %d)", syntax, line, col)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("it ends before the value does")
	}
	return err
}

// position returns the line and column of the byte before offset.
func position(doc []byte, offset int64) (line, col int) {
	line, col = 1, 0
	for _, c := range doc[:min(max(offset-1, 0), int64(len(doc)))] {
		if c == '\n' {
			line, col = line+1, 0
			continue
		}
		col++
	}
	return line, col + 1
}

// The HTTP event kinds, as --http names them.
var httpKinds = []string{"apigateway", "apigatewayv2", "functionurl", "alb"}

// httpEvent decodes event as the HTTP request event of kind, as the
// Lambda runtime decodes it for the adapter's handler, or of the kind its
// members tell with "auto".
func httpEvent(event []byte, kind string) (any, error) {
	if kind == "auto" {
		kind = detectKind(event)
		if kind == "" {
			return nil, usageError("the event is not one of an API Gateway REST or HTTP API, a Function URL or an ALB: give its kind with --http (%v)", httpKinds)
		}
	}
	var ev any
	switch kind {
	case "apigateway":
		ev = new(events.APIGatewayProxyRequest)
	case "apigatewayv2":
		ev = new(events.APIGatewayV2HTTPRequest)
	case "functionurl":
		ev = new(events.LambdaFunctionURLRequest)
	case "alb":
		ev = new(events.ALBTargetGroupRequest)
	default:
		return nil, usageError("--http %q: want auto or one of %v", kind, httpKinds)
	}
	if err := json.Unmarshal(event, ev); err != nil {
		return nil, usageError("the event is not a %s request event: %v", kind, err)
	}
	return ev, nil
}

// detectKind tells an HTTP event's kind from its members: ALB's request
// context names its target group, payload format 2.0 has a version and an
// http member (a Function URL's domain is lambda-url's), and REST APIs'
// events have httpMethod.
func detectKind(event []byte) string {
	var probe struct {
		Version        string          `json:"version"`
		HTTPMethod     string          `json:"httpMethod"`
		RequestContext json.RawMessage `json:"requestContext"`
	}
	var ctx struct {
		ELB        json.RawMessage `json:"elb"`
		HTTP       json.RawMessage `json:"http"`
		DomainName string          `json:"domainName"`
	}
	if json.Unmarshal(event, &probe) != nil || json.Unmarshal(probe.RequestContext, &ctx) != nil {
		return ""
	}
	switch {
	case ctx.ELB != nil:
		return "alb"
	case probe.Version == "2.0" && ctx.HTTP != nil && bytes.Contains([]byte(ctx.DomainName), []byte(".lambda-url.")):
		return "functionurl"
	case probe.Version == "2.0" && ctx.HTTP != nil:
		return "apigatewayv2"
	case probe.HTTPMethod != "":
		return "apigateway"
	}
	return ""
}
