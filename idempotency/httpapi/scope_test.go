package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func TestScopePrincipal(t *testing.T) {
	rest := loadEvent[events.APIGatewayProxyRequest](t, "apigw-request.json")
	restCognito := rest
	restCognito.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"sub": "user-sub", "email": "a@example.com"}}
	restIdentityPool := rest // IAM authorization with Cognito identity pool credentials
	restIdentityPool.RequestContext.Authorizer = nil
	restIAM := restIdentityPool
	restIAM.RequestContext.Identity.CognitoIdentityID = ""
	restNone := restIAM
	restNone.RequestContext.Identity.UserArn = ""

	jwt := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json")
	jwtWithSub := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json")
	jwtWithSub.RequestContext.Authorizer.JWT.Claims["sub"] = "jwt-sub"
	iam := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-iam.json")
	iamUser := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-iam.json")
	iamUser.RequestContext.Authorizer.IAM.CognitoIdentity.IdentityID = ""
	lambdaAuth := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-lambda-authorizer.json")
	v2None := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-no-authorizer.json")

	furl := loadEvent[events.LambdaFunctionURLRequest](t, "lambda-urls-request.json")
	furlNone := furl
	furlNone.RequestContext.Authorizer = nil
	alb := loadEvent[events.ALBTargetGroupRequest](t, "alb-lambda-target-request-headers-only.json")

	for name, tc := range map[string]struct {
		event any
		want  string // "" for ErrNoScope
	}{
		"REST Lambda authorizer":          {&rest, "admin"},
		"REST Cognito user pool":          {&restCognito, "user-sub"},
		"REST IAM with identity pool":     {&restIdentityPool, "theCognitoIdentityId"},
		"REST IAM":                        {&restIAM, "theUserArn"},
		"REST without authorizer":         {&restNone, ""},
		"HTTP API JWT without sub":        {&jwt, ""},
		"HTTP API JWT":                    {&jwtWithSub, "jwt-sub"},
		"HTTP API IAM with identity pool": {&iam, "us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce"},
		"HTTP API IAM":                    {&iamUser, "arn:aws:iam::1234567890:user/Admin"},
		"HTTP API Lambda authorizer":      {&lambdaAuth, ""},
		"HTTP API without authorizer":     {&v2None, ""},
		"Function URL IAM":                {&furl, "arn:aws:iam::111122223333:user/example-user"},
		"Function URL without auth":       {&furlNone, ""},
		"ALB":                             {&alb, ""},
		"no event":                        {nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := httpapi.ScopePrincipal()(t.Context(), &httpapi.Request{Event: tc.event})
			if tc.want == "" {
				assert.ErrorIs(t, err, httpapi.ErrNoScope)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestScopeClaim(t *testing.T) {
	rest := loadEvent[events.APIGatewayProxyRequest](t, "apigw-request.json")
	restCognito := rest
	restCognito.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"custom:tenant": "acme"}}
	jwt := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json")
	lambdaAuth := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-lambda-authorizer.json")
	furl := loadEvent[events.LambdaFunctionURLRequest](t, "lambda-urls-request.json")

	for name, tc := range map[string]struct {
		event any
		claim string
		want  string // "" for ErrNoScope
	}{
		"REST Lambda authorizer string": {&rest, "clientName", "Exata"},
		"REST Lambda authorizer number": {&rest, "clientId", "1"},
		"REST absent":                   {&rest, "tenant", ""},
		"REST Cognito claim":            {&restCognito, "custom:tenant", "acme"},
		"HTTP API JWT claim":            {&jwt, "claim1", "value1"},
		"HTTP API JWT absent":           {&jwt, "tenant", ""},
		"HTTP API Lambda authorizer":    {&lambdaAuth, "key", "value"},
		"Function URL":                  {&furl, "userArn", ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := httpapi.ScopeClaim(tc.claim)(t.Context(), &httpapi.Request{Event: tc.event})
			if tc.want == "" {
				assert.ErrorIs(t, err, httpapi.ErrNoScope)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestScopeHeaderRejectsInvalidName(t *testing.T) {
	_, err := httpapi.ScopeHeader("X Tenant")(t.Context(), &httpapi.Request{})
	require.Error(t, err)
	assert.NotErrorIs(t, err, httpapi.ErrNoScope, "a programming error, not the client's")
}

// A principal from the authorizer isolates callers who pick the same key.
func TestPrincipalsIsolated(t *testing.T) {
	runs := 0
	h := httpapi.MustWrapAPIGatewayV2(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: "for " + ev.RequestContext.Authorizer.JWT.Claims["sub"]}, nil
	}, memory.New(), httpapi.WithScope(httpapi.ScopePrincipal()), httpapi.WithLogger(discard()))

	as := func(sub, body string) events.APIGatewayV2HTTPRequest {
		ev := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json")
		ev.RequestContext.HTTP.Method = "POST"
		ev.Headers["idempotency-key"] = "shared-key"
		ev.RequestContext.Authorizer.JWT.Claims["sub"] = sub
		ev.Body = body
		return ev
	}
	alice, err := h(t.Context(), as("alice", "a"))
	require.NoError(t, err)
	bob, err := h(t.Context(), as("bob", "b"))
	require.NoError(t, err)
	assert.Equal(t, "for alice", alice.Body)
	assert.Equal(t, "for bob", bob.Body, "bob does not see alice's response, nor a mismatch")
	again, err := h(t.Context(), as("alice", "a"))
	require.NoError(t, err)
	assert.Equal(t, "for alice", again.Body)
	assert.Equal(t, "true", again.Headers[httpapi.HeaderReplayed])
	assert.Equal(t, 2, runs)

	anonymous := as("", "c")
	anonymous.RequestContext.Authorizer = nil
	resp, err := h(t.Context(), anonymous)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, resp.Body, httpapi.ProblemMissingScope)
}
