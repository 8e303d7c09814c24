package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func TestScopePrincipal(t *testing.T) {
	rest := loadEvent[events.APIGatewayProxyRequest](t, "apigw-request.json")
	restCognito := rest
	restCognito.RequestContext.Authorizer = map[string]any{"claims": map[string]any{
		"iss": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_pool", "sub": "user-sub", "email": "a@example.com"}}
	restCognitoNoIss := rest
	restCognitoNoIss.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"sub": "user-sub"}}
	restIdentityPool := rest // IAM authorization with Cognito identity pool credentials
	restIdentityPool.RequestContext.Authorizer = nil
	restIAM := restIdentityPool
	restIAM.RequestContext.Identity.CognitoIdentityID = ""
	restNone := restIAM
	restNone.RequestContext.Identity.UserArn = ""

	jwt := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json")
	jwtWithSub := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json")
	jwtWithSub.RequestContext.Authorizer.JWT.Claims["sub"] = "jwt-sub"
	jwtWithIss := loadEvent[events.APIGatewayV2HTTPRequest](t, "apigw-v2-request-jwt-authorizer.json")
	jwtWithIss.RequestContext.Authorizer.JWT.Claims["sub"] = "jwt-sub"
	jwtWithIss.RequestContext.Authorizer.JWT.Claims["iss"] = "https://issuer.example.com"
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
		"REST Lambda authorizer":          {&rest, `["lambda-authorizer","gy415nuibc","admin"]`},
		"REST Cognito user pool":          {&restCognito, `["jwt","https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_pool","user-sub"]`},
		"REST Cognito without iss":        {&restCognitoNoIss, ""},
		"REST IAM with identity pool":     {&restIdentityPool, `["cognito-identity","theCognitoIdentityPoolId","theCognitoIdentityId"]`},
		"REST IAM":                        {&restIAM, `["iam","theAccountId","theUserArn"]`},
		"REST without authorizer":         {&restNone, ""},
		"HTTP API JWT without sub":        {&jwt, ""},
		"HTTP API JWT without iss":        {&jwtWithSub, ""},
		"HTTP API JWT":                    {&jwtWithIss, `["jwt","https://issuer.example.com","jwt-sub"]`},
		"HTTP API IAM with identity pool": {&iam, `["cognito-identity","us-east-1:4f291106-8703-466b-8f2b-3ecee1ca56ce","us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce"]`},
		"HTTP API IAM":                    {&iamUser, `["iam","1234567890","arn:aws:iam::1234567890:user/Admin"]`},
		"HTTP API Lambda authorizer":      {&lambdaAuth, ""},
		"HTTP API without authorizer":     {&v2None, ""},
		"Function URL IAM":                {&furl, `["iam","111122223333","arn:aws:iam::111122223333:user/example-user"]`},
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

// Two identity providers may give two different callers the same subject:
// ScopePrincipal keeps them apart. They never get each other's replay,
// neither is blocked by the other's request in progress, and the same
// issuer and subject share one record.
func TestPrincipalsFromTwoIssuers(t *testing.T) {
	forEachEventType(t, func(t *testing.T, et eventType) {
		entered, release := make(chan struct{}), make(chan struct{})
		a := app{respond: func(run int, req httpReq) (httpResp, error) {
			if run == 1 {
				close(entered)
				<-release
			}
			resp := created(run)
			resp.body = fmt.Sprintf(`{"run":%d,"for":%q}`, run, req.body)
			return resp, nil
		}}
		send := et.wrap(t, a.handle, memory.New(), httpapi.WithScope(httpapi.ScopePrincipal()), idempotency.WithLogger(discard()))
		as := func(issuer, body string) httpReq {
			req := post("shared-key", body)
			req.caller = &caller{issuer: issuer, subject: "1234"}
			return req
		}
		if et.handler || strings.HasPrefix(et.name, "ALB") {
			// An ALB target carries no principal (400), and behind
			// Middleware no authorizer ran, a mistake of the server's that
			// WithRequestScope avoids (500): nothing is shared, because
			// nothing runs.
			want := httpapi.Problem{Status: http.StatusBadRequest, Type: httpapi.ProblemMissingScope}
			if et.handler {
				want = httpapi.Problem{Status: http.StatusInternalServerError, Type: httpapi.ProblemHandlerFailed}
			}
			resp, err := send(t.Context(), as("111111111111", orderA))
			require.NoError(t, err)
			assert.Equal(t, want.Status, resp.status)
			assert.Equal(t, want.Type, problemOf(t, resp).Type)
			assert.Zero(t, a.count())
			return
		}
		// Issuers: for Function URLs, the account of an IAM principal.
		one, two := "https://issuer-one.example.com", "https://issuer-two.example.com"
		if et.name == "FunctionURL" {
			one, two = "111111111111", "222222222222"
		}

		var first httpResp
		var wg sync.WaitGroup
		wg.Go(func() {
			var err error
			first, err = send(t.Context(), as(one, "a"))
			assert.NoError(t, err)
		})
		<-entered
		other, err := send(t.Context(), as(two, "b"))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, other.status, "the other issuer's request in progress does not block this one")
		assert.Contains(t, other.body, `"run":2`)
		busy, err := send(t.Context(), as(one, "a"))
		require.NoError(t, err)
		assert.Equal(t, http.StatusConflict, busy.status, "the same issuer and subject share the record")
		close(release)
		wg.Wait()

		replayOne, err := send(t.Context(), as(one, "a"))
		require.NoError(t, err)
		assert.Equal(t, first, withoutReplayHeader(replayOne))
		assert.Equal(t, "true", replayOne.headers.Get(httpapi.HeaderReplayed))
		replayTwo, err := send(t.Context(), as(two, "b"))
		require.NoError(t, err)
		assert.Equal(t, other, withoutReplayHeader(replayTwo), "each issuer's caller gets its own response")
		assert.Equal(t, 2, a.count())

		if et.name != "FunctionURL" {
			// A token without an issuer does not say whose subject it is.
			noIssuer, err := send(t.Context(), as("", "a"))
			require.NoError(t, err)
			assert.Equal(t, http.StatusBadRequest, noIssuer.status)
			assert.Equal(t, httpapi.ProblemMissingScope, problemOf(t, noIssuer).Type)
		}
	})
}
