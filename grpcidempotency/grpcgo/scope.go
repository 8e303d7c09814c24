package grpcgo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
)

// ScopePeerCertificate returns a scope function (see
// [grpcidempotency.WithScope]) that scopes calls by the client certificate
// that the server verified (mutual TLS). It uses the certificate's issuer,
// subject and URI names (a SPIFFE ID). These stay the same when the
// certificate is renewed. A call without a verified client certificate
// fails with [grpcidempotency.ErrNoScope].
func ScopePeerCertificate() func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok {
			return "", fmt.Errorf("%w: no peer in the context", grpcidempotency.ErrNoScope)
		}
		info, ok := p.AuthInfo.(credentials.TLSInfo)
		if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
			return "", fmt.Errorf("%w: no verified client certificate", grpcidempotency.ErrNoScope)
		}
		leaf := info.State.VerifiedChains[0][0]
		parts := []string{"x509", leaf.Issuer.String(), leaf.Subject.String()}
		uris := make([]string, 0, len(leaf.URIs))
		for _, u := range leaf.URIs {
			uris = append(uris, u.String())
		}
		slices.Sort(uris)
		b, err := json.Marshal(append(parts, uris...))
		return string(b), err
	}
}

// ScopeMetadata returns a scope function (see [grpcidempotency.WithScope])
// that scopes calls by the value of the incoming metadata key. A call
// without it, or with several different values, fails with
// [grpcidempotency.ErrNoScope].
//
// Use it only for metadata that a trusted component sets and callers
// cannot. One is a proxy that authenticates callers and replaces the key
// on every call. Examples are Envoy's x-forwarded-client-cert and a JWT
// filter's payload header. Another is an interceptor of your own before
// this one.
func ScopeMetadata(key string) func(context.Context) (string, error) {
	valid := engine.ValidMetadataKey(key)
	return func(ctx context.Context) (string, error) {
		if !valid {
			return "", fmt.Errorf("grpcgo: ScopeMetadata(%q): not a valid metadata key", key)
		}
		md, _ := metadata.FromIncomingContext(ctx)
		values := md.Get(key)
		if len(values) == 0 || values[0] == "" {
			return "", fmt.Errorf("%w: no %s metadata", grpcidempotency.ErrNoScope, key)
		}
		for _, v := range values[1:] {
			if v != values[0] {
				return "", fmt.Errorf("%w: several different %s values", grpcidempotency.ErrNoScope, key)
			}
		}
		return values[0], nil
	}
}
