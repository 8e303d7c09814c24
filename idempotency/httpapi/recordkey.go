package httpapi

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
)

// RecordKey returns the key of the record that the adapters, given opts,
// keep for event. It also returns the record's payload hash, the hash of
// the request's fingerprint. The key is what [idempotency.KeyFromContext]
// gives the handler. An operator looks it up in the store to find the
// record of a request, as the retrysafe command's key does. event is an
// *events.APIGatewayProxyRequest ([WrapAPIGateway]), an
// *events.APIGatewayV2HTTPRequest ([WrapAPIGatewayV2]), an
// *events.LambdaFunctionURLRequest ([WrapFunctionURL]) or an
// *events.ALBTargetGroupRequest ([WrapALB]).
//
// The adapters' default prefix names the handler they wrap, which
// RecordKey does not know. So opts must include [idempotency.WithKeyPrefix]
// with the prefix the adapter uses. The options that shape keys are the
// adapters' ([WithHeader], [WithMethods], [WithOptionalKey],
// [WithFingerprintHeaders], [WithScope]). The others are checked and
// otherwise ignored.
//
// For a request that the adapters keep no record of, the error matches
// [idempotency.ErrNoKey]. That is so when:
//   - its method needs no key;
//   - it has no key header (and the adapters run it without one, or answer 400);
//   - its key header is invalid;
//   - its scope function found no caller (the error matches [ErrNoScope] too).
//
// An error of the scope function is returned wrapped.
func RecordKey(ctx context.Context, event any, opts ...idempotency.HandlerOption) (key, payloadHash string, err error) {
	const name = "httpapi: RecordKey"
	var r Request
	switch ev := event.(type) {
	case *events.APIGatewayProxyRequest:
		r = restBinding.view(ev)
	case *events.APIGatewayV2HTTPRequest:
		r = v2Binding.view(ev)
	case *events.LambdaFunctionURLRequest:
		r = functionURLBinding.view(ev)
	case *events.ALBTargetGroupRequest:
		r = albBinding.view(ev)
	default:
		return "", "", fmt.Errorf("%s: a %T is not an HTTP request event of an adapter; give a pointer to an API Gateway, Function URL or ALB request", name, event)
	}
	cfg, err := newConfig(name, lambdaEntry, opts)
	if err != nil {
		return "", "", err
	}
	if cfg.prefix == "" {
		return "", "", fmt.Errorf("%s: no idempotency.WithKeyPrefix: the adapters' default prefix names the handler they wrap, which RecordKey does not know", name)
	}
	k := cfg.keyRequest(ctx, &r)
	switch {
	case k.pass && !cfg.keyed(r.Method):
		return "", "", &noRecordError{why: fmt.Sprintf("%s requests need no %s (see WithMethods): the adapters run them without a record", r.Method, cfg.header)}
	case k.pass:
		return "", "", &noRecordError{why: fmt.Sprintf("the request has no %s header: the adapters run it without a record (WithOptionalKey)", cfg.header)}
	case k.refusal != (problemKind{}):
		why := fmt.Sprintf("the adapters answer %d (%s) and keep no record: %s", k.refusal.status, k.refusal.title, k.detail)
		if k.err != nil {
			why += " (" + k.err.Error() + ")"
		}
		return "", "", &noRecordError{why: why, err: k.err}
	case k.err != nil:
		return "", "", fmt.Errorf("%s: %s: %w", name, k.failed, k.err)
	}
	return core.Key(cfg.prefix, cfg.tenant(ctx), k.key), core.Hash(k.fingerprint), nil
}

// noRecordError is RecordKey's error for a request that the adapters keep
// no record of.
type noRecordError struct {
	why string
	err error // the scope function's, or nil
}

func (e *noRecordError) Error() string { return "httpapi: RecordKey: " + e.why }

func (e *noRecordError) Is(target error) bool { return target == idempotency.ErrNoKey }

func (e *noRecordError) Unwrap() error { return e.err }
