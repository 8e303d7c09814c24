package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/jmespath"
)

var keyCommand = &command{
	name:    "key",
	args:    "[EVENT.json]",
	summary: "print the key the library derives for an event",
	about: `The event is read from the file, or from stdin. The key is derived with the
library's own code, from the options of the wrapped function: its prefix
(--prefix; or --function and --handler, the default prefix
<function>.<Go handler name>), its key expression (--key; the whole event
without one) and its payload validation (--validation), as
idempotency.Wrap derives it for a handler of json.RawMessage, or of a type
that keeps the members the expressions select. With --http, the event is an
HTTP request and the key is the HTTP adapters': from the Idempotency-Key
header (--header), with the scope (--scope) and the fingerprint
(--fingerprint-header) the function gives them. With --tenant, the key is
that of an invocation of the tenant, as a function in Lambda's tenant
isolation mode keeps it (unless it gave up tenant isolation with
idempotency.WithoutTenantIsolation).

Pass the key to get: retrysafe get "$(retrysafe key -q ... event.json)".`,
	flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		k := &keyFlags{}
		fs.StringVar(&k.key, "key", "", "the key `expression` (idempotency.WithKey); default the whole event")
		fs.StringVar(&k.validation, "validation", "", "the payload validation `expression` (idempotency.WithPayloadValidation)")
		fs.StringVar(&k.prefix, "prefix", "", "the key `prefix` (idempotency.WithKeyPrefix)")
		fs.StringVar(&k.function, "function", "", "the Lambda function `name`, which starts the default prefix <function>.<handler> "+
			"(default $AWS_LAMBDA_FUNCTION_NAME; the other commands' --pk-function is another thing)")
		fs.StringVar(&k.handler, "handler", "", "the Go `name` of the wrapped function, without its import path (main.handler), which ends the default prefix")
		fs.StringVar(&k.http, "http", "", "the event is an HTTP request of `kind` auto, apigateway, apigatewayv2, functionurl or alb: the key is the HTTP adapters'")
		fs.StringVar(&k.header, "header", "", "with --http, the key's `header` (httpapi.WithHeader; default Idempotency-Key)")
		fs.StringVar(&k.scope, "scope", "", "with --http, the `scope`: principal, claim:NAME or header:NAME (httpapi.WithScope)")
		fs.Func("fingerprint-header", "with --http, a `header` in the fingerprint (httpapi.WithFingerprintHeaders); repeatable", func(v string) error {
			k.fingerprint = append(k.fingerprint, v)
			return nil
		})
		fs.StringVar(&k.methods, "methods", "", "with --http, the `methods` that need a key, comma-separated (httpapi.WithMethods; default POST,PATCH)")
		fs.StringVar(&k.tenant, "tenant", "", "the tenant `ID` of the invocation (Lambda tenant isolation), which scopes the key")
		fs.BoolVar(&k.quiet, "q", false, "print the key alone")
		out := outputFlag(fs)
		return func(ctx context.Context, e *env, args []string) error { return k.run(ctx, e, out, args) }
	},
}

type keyFlags struct {
	key, validation, prefix, function, handler string
	http, header, scope, methods, tenant       string
	fingerprint                                []string
	quiet                                      bool
}

func (k *keyFlags) run(ctx context.Context, e *env, out *output, args []string) error {
	prefix, err := k.keyPrefix(e)
	if err != nil {
		return err
	}
	event, name, err := readEvent(ctx, e, args)
	if err != nil {
		return err
	}
	var key, payloadHash string
	if k.http != "" {
		tctx := ctx
		if k.tenant != "" {
			tctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{TenantID: k.tenant})
		}
		key, payloadHash, err = k.httpKey(tctx, prefix, event)
	} else {
		key, payloadHash, err = k.wrapKey(prefix, event)
	}
	var noKey *core.DeriveError
	switch {
	case errors.As(err, &noKey), errors.Is(err, idempotency.ErrNoKey):
		return notFound("the library keeps no record of %s: %s", name, strings.TrimPrefix(err.Error(), "httpapi: RecordKey: "))
	case err != nil:
		return err
	}
	switch {
	case k.quiet:
		fmt.Fprintln(e.stdout, key)
		return nil
	case out.json:
		return writeJSON(e.stdout, struct {
			Key         string `json:"key"`
			Tenant      string `json:"tenant,omitempty"`
			PayloadHash string `json:"payload_hash,omitempty"`
		}{key, k.tenant, payloadHash})
	}
	t := newTable(e.stdout, e.tableWidth(out))
	t.row("key", key)
	if k.tenant != "" {
		t.row("tenant", k.tenant)
	}
	t.row("payload hash", orNone(payloadHash, "no payload validation"))
	return t.flush()
}

// keyPrefix returns the prefix of the flags: --prefix, or the default
// prefix rule of the library applied to --function and --handler.
func (k *keyFlags) keyPrefix(e *env) (string, error) {
	function := k.function
	if function == "" {
		function = e.getenv(core.EnvFunctionName)
	}
	switch {
	case k.prefix != "" && (k.function != "" || k.handler != ""):
		return "", usageError("give --prefix, or --function and --handler, not both")
	case k.prefix != "":
		return k.prefix, nil
	case function == "" && k.handler == "":
		return "", usageError("no prefix: give --prefix, or --handler (the Go name of the wrapped function, such as main.handler) and --function, " +
			"whose default prefix is <function>.<handler>")
	}
	return core.Prefix(function, k.handler), nil
}

// wrapKey derives the key of event as idempotency.Wrap does.
func (k *keyFlags) wrapKey(prefix string, event []byte) (key, payloadHash string, err error) {
	if k.header != "" || k.scope != "" || len(k.fingerprint) > 0 || k.methods != "" {
		return "", "", usageError("--header, --scope, --fingerprint-header and --methods are the HTTP adapters': give --http too")
	}
	keyExpr, err := compile("--key", k.key)
	if err != nil {
		return "", "", err
	}
	validation, err := compile("--validation", k.validation)
	if err != nil {
		return "", "", err
	}
	return core.Derive(prefix, k.tenant, keyExpr, validation, json.RawMessage(event))
}

// compile compiles expr as Wrap's options do; "" is none.
func compile(flagName, expr string) (*jmespath.Expression, error) {
	if expr == "" {
		return nil, nil
	}
	e, err := core.CompileKey(expr)
	if err != nil {
		return nil, usageError("%s: %v", flagName, err)
	}
	return e, nil
}

// httpKey derives the key of event as the HTTP adapters do.
func (k *keyFlags) httpKey(ctx context.Context, prefix string, event []byte) (key, payloadHash string, err error) {
	if k.key != "" || k.validation != "" {
		return "", "", usageError("--key and --validation are idempotency.Wrap's: the HTTP adapters key requests by their header (--header)")
	}
	ev, err := httpEvent(event, k.http)
	if err != nil {
		return "", "", err
	}
	opts := []idempotency.HandlerOption{idempotency.WithKeyPrefix(prefix)}
	if k.header != "" {
		opts = append(opts, httpapi.WithHeader(k.header))
	}
	if k.scope != "" {
		scope, err := scopeOf(k.scope)
		if err != nil {
			return "", "", err
		}
		opts = append(opts, httpapi.WithScope(scope))
	}
	if len(k.fingerprint) > 0 {
		opts = append(opts, httpapi.WithFingerprintHeaders(k.fingerprint...))
	}
	if k.methods != "" {
		opts = append(opts, httpapi.WithMethods(strings.Split(k.methods, ",")...))
	}
	key, payloadHash, err = httpapi.RecordKey(ctx, ev, opts...)
	switch {
	case errors.Is(err, idempotency.ErrNoKey):
		return "", "", err
	case err != nil:
		// An option the adapters refuse, or a scope that fails.
		return "", "", usageError("%s", strings.TrimPrefix(err.Error(), "httpapi: RecordKey: "))
	}
	return key, payloadHash, nil
}

// scopeOf returns the scope function that --scope names.
func scopeOf(s string) (httpapi.ScopeFunc, error) {
	kind, name, _ := strings.Cut(s, ":")
	switch {
	case s == "principal":
		return httpapi.ScopePrincipal(), nil
	case kind == "claim" && name != "":
		return httpapi.ScopeClaim(name), nil
	case kind == "header" && name != "":
		return httpapi.ScopeHeader(name), nil
	}
	return nil, usageError("--scope %q: want principal, claim:NAME or header:NAME", s)
}

// orNone returns s, or "none (why)" when s is empty.
func orNone(s, why string) string {
	if s == "" {
		return "none (" + why + ")"
	}
	return s
}
