package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/internal/canonical"
	"github.com/retrysafe/retrysafe/internal/httpkey"
)

// ErrNoScope is matched (with errors.Is) by the errors of scope functions
// that find nothing identifying the caller in the request. The adapter
// answers such requests with [ProblemMissingScope] (400) and does not run
// the handler. Custom scope functions should wrap it for the same answer.
// Any other error counts as a failure of the server (500, see
// [WithReturnErrors]).
var ErrNoScope = errors.New("httpapi: the request does not identify its caller")

// A ScopeFunc returns the scope of a request: who is asking. That may be a
// principal established by the API's authorizer, or a tenant. Requests in
// different scopes never share an idempotency record. So two callers who
// pick the same key never see each other's responses, nor block each
// other.
//
// The scope must come from something the caller cannot forge. An empty
// scope is treated as [ErrNoScope].
type ScopeFunc func(ctx context.Context, r *Request) (string, error)

// ScopeHeader returns a [ScopeFunc] that scopes requests by the value of
// the request header name (matched without regard to case). A request
// without the header, or with several different values, fails with
// [ErrNoScope].
//
// Use it only for headers that a trusted component sets. One is
// X-Amzn-Oidc-Identity behind an ALB that authenticates users. ALB
// replaces it on authenticated routes. Another is a tenant header that the
// caller is authorized for.
func ScopeHeader(name string) ScopeFunc {
	valid := httpkey.IsToken(name)
	return func(_ context.Context, r *Request) (string, error) {
		if !valid {
			return "", fmt.Errorf("httpapi: ScopeHeader(%q): not a valid header name", name)
		}
		values := r.Values(name)
		if len(values) == 0 || values[0] == "" {
			return "", fmt.Errorf("%w: no %s header", ErrNoScope, name)
		}
		for _, v := range values[1:] {
			if v != values[0] {
				return "", fmt.Errorf("%w: several different %s headers", ErrNoScope, name)
			}
		}
		return values[0], nil
	}
}

// ScopeClaim returns a ScopeFunc that scopes requests by a value the API's
// authorizer attached to the request:
//
//   - HTTP APIs (events.APIGatewayV2HTTPRequest): the JWT authorizer's claim
//     name, else the Lambda authorizer's context value name.
//   - REST APIs and HTTP APIs with payload format 1.0
//     (events.APIGatewayProxyRequest): the claim name of a Cognito user pool
//     or JWT authorizer (requestContext.authorizer.claims). Else, the
//     Lambda authorizer's context value name (requestContext.authorizer).
//
// String values are used as they are. Numbers and booleans are used as
// JSON text. Function URLs and ALB carry no authorizer values. There, and
// when the value is absent, it fails with [ErrNoScope]. Behind
// [Middleware], where no authorizer ran, it fails with an error of the
// server's (500). Use [WithRequestScope] there.
//
// A claim is only as unique as its issuer makes it: sub, for one, is
// unique within one issuer only. When callers come from several identity
// providers, use ScopePrincipal, or a claim that names a tenant across
// them.
func ScopeClaim(name string) ScopeFunc {
	return func(_ context.Context, r *Request) (string, error) {
		var v any
		switch ev := r.Event.(type) {
		case *http.Request:
			return "", lambdaOnly("ScopeClaim")
		case *events.APIGatewayProxyRequest:
			v = restAuthorizerValue(ev.RequestContext.Authorizer, name)
		case *events.APIGatewayV2HTTPRequest:
			if a := ev.RequestContext.Authorizer; a != nil {
				if a.JWT != nil {
					if c, ok := a.JWT.Claims[name]; ok {
						v = c
					}
				}
				if v == nil {
					v = a.Lambda[name]
				}
			}
		}
		s, err := scopeText(v)
		if err != nil {
			return "", err
		}
		if s == "" {
			return "", fmt.Errorf("%w: the authorizer attached no %q value", ErrNoScope, name)
		}
		return s, nil
	}
}

func restAuthorizerValue(auth map[string]any, name string) any {
	if claims, ok := auth["claims"].(map[string]any); ok {
		if v, ok := claims[name]; ok && v != nil {
			return v
		}
	}
	return auth[name]
}

// scopeText turns an authorizer value into a scope: strings as they are,
// anything else as canonical JSON, so that equal values give equal scopes.
func scopeText(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	b, err := canonical.Append(nil, v)
	if err != nil {
		return "", fmt.Errorf("httpapi: authorizer value: %w", err)
	}
	return string(b), nil
}

// ScopePrincipal returns a [ScopeFunc] that scopes requests by the
// principal that the API authenticated. The principal is named so that it
// is unique across identity providers and accounts. Two principals that
// different providers happen to give the same name never share a record.
// An example is two JWT issuers with a user "1234".
//
//	Event and identity source                 Scope made of                        Why it is unique
//	REST API, Lambda authorizer               API ID, principalId                  the authorizer names principals within its API
//	REST API, Cognito user pool or JWT        iss and sub claims                   OpenID Connect: sub is unique within its issuer
//	HTTP API, JWT authorizer                  iss and sub claims                   the same
//	REST or HTTP API, IAM with an identity    identity pool ID, identity ID        every user of a pool assumes one role, so the
//	  pool (Cognito identity)                                                        ARN does not tell them apart
//	REST or HTTP API, IAM                     account ID, caller ARN               an ARN names one principal in one account
//	Function URL, IAM auth                    account ID, caller ARN               the same
//
// The parts are kept apart by their source, so that no value of one
// source can equal a value of another. A request whose identity lacks a
// part fails with [ErrNoScope]. Examples are a JWT without iss or sub, a
// route without an authorizer, and an ALB target. Lambda authorizers of
// HTTP APIs name no principal. Use [ScopeClaim] with a context value they
// set. Behind an ALB that authenticates users, use
// ScopeHeader("X-Amzn-Oidc-Identity"). Behind [Middleware], where no
// authorizer ran, it fails with an error of the server's (500). Use
// [WithRequestScope] there.
func ScopePrincipal() ScopeFunc {
	return func(_ context.Context, r *Request) (string, error) {
		var p string
		switch ev := r.Event.(type) {
		case *http.Request:
			return "", lambdaOnly("ScopePrincipal")
		case *events.APIGatewayProxyRequest:
			p = restPrincipal(ev)
		case *events.APIGatewayV2HTTPRequest:
			if a := ev.RequestContext.Authorizer; a != nil {
				switch {
				case a.JWT != nil:
					p = principal("jwt", a.JWT.Claims["iss"], a.JWT.Claims["sub"])
				case a.IAM != nil && a.IAM.CognitoIdentity.IdentityID != "":
					p = principal("cognito-identity", a.IAM.CognitoIdentity.IdentityPoolID, a.IAM.CognitoIdentity.IdentityID)
				case a.IAM != nil:
					p = principal("iam", a.IAM.AccountID, a.IAM.UserARN)
				}
			}
		case *events.LambdaFunctionURLRequest:
			if a := ev.RequestContext.Authorizer; a != nil && a.IAM != nil {
				p = principal("iam", a.IAM.AccountID, a.IAM.UserARN)
			}
		}
		if p == "" {
			return "", fmt.Errorf("%w: no authenticated principal in the request", ErrNoScope)
		}
		return p, nil
	}
}

func restPrincipal(ev *events.APIGatewayProxyRequest) string {
	auth := ev.RequestContext.Authorizer
	if p, ok := auth["principalId"].(string); ok && p != "" {
		return principal("lambda-authorizer", ev.RequestContext.APIID, p)
	}
	if claims, ok := auth["claims"].(map[string]any); ok {
		iss, _ := claims["iss"].(string)
		sub, _ := claims["sub"].(string)
		return principal("jwt", iss, sub)
	}
	id := ev.RequestContext.Identity
	if id.CognitoIdentityID != "" {
		return principal("cognito-identity", id.CognitoIdentityPoolID, id.CognitoIdentityID)
	}
	return principal("iam", id.AccountID, id.UserArn)
}

// principal returns the scope of a principal named by parts within source,
// as a JSON array (which keeps the parts apart whatever they contain), or
// "" when a part is missing.
func principal(source string, parts ...string) string {
	if slices.Contains(parts, "") {
		return ""
	}
	b, _ := json.Marshal(append([]string{source}, parts...)) // strings: cannot fail
	return string(b)
}

// lambdaOnly is the error of a scope function that reads Lambda events,
// given to Middleware: a mistake of the server's, not the client's, so it
// does not wrap ErrNoScope.
func lambdaOnly(name string) error {
	return errors.New("httpapi: " + name + " reads the authorizer data of Lambda events, and Middleware's requests have none; " +
		"scope them with WithRequestScope, from what your authentication middleware put in the request's context")
}
