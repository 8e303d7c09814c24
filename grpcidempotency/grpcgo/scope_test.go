package grpcgo_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrysafe/retrysafe/grpcidempotency"
	"github.com/retrysafe/retrysafe/grpcidempotency/grpcgo"
	"github.com/retrysafe/retrysafe/grpcidempotency/internal/testing/testpb"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// Two callers with the same key in different scopes never share a
// record; a call without a scope is refused.
func TestScopeMetadataKeepsCallersApart(t *testing.T) {
	svc := newOrders()
	client := dial(t, serve(t, svc, memory.New(), grpcidempotency.WithScope(grpcgo.ScopeMetadata("x-user"))))
	as := func(user string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "x-user", user)
	}
	req := &testpb.CreateOrderRequest{RequestId: "same-key"}
	for _, user := range []string{"alice", "bob", "alice"} {
		_, err := client.CreateOrder(as(user), req)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, svc.Runs("create:same-key"), "alice's retry is a replay; bob's call is his own")

	_, err := client.CreateOrder(t.Context(), req)
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	assert.Equal(t, grpcidempotency.ReasonMissingScope, reasonOf(err))

	// Calls without a key need no scope.
	_, err = client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{})
	require.NoError(t, err)
}

// A scope function's status is the answer; another error is INTERNAL.
func TestScopeFunctionErrors(t *testing.T) {
	svc := newOrders()
	var fail error
	client := dial(t, serve(t, svc, memory.New(), grpcidempotency.WithScope(func(context.Context) (string, error) { return "", fail })))
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied},
		{assert.AnError, codes.Internal},
		{nil, codes.Unauthenticated}, // an empty scope
	} {
		fail = tc.err
		_, err := client.CreateOrder(t.Context(), &testpb.CreateOrderRequest{RequestId: "k"})
		assert.Equal(t, tc.code, status.Code(err))
	}
	assert.Equal(t, 0, svc.Total())
}

// ScopePeerCertificate scopes calls by the client certificate that the
// server verified.
func TestScopePeerCertificate(t *testing.T) {
	ca := newCA(t)
	svc := newOrders()
	idem, err := grpcgo.NewServerInterceptor(memory.New(), grpcidempotency.WithScope(grpcgo.ScopePeerCertificate()))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, "server", true)},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	})
	addr := serveWith(t, svc, grpc.Creds(creds), grpc.ChainUnaryInterceptor(idem))
	clientAs := func(name string) testpb.OrdersClient {
		cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
		if name != "" {
			cfg.Certificates = []tls.Certificate{ca.issue(t, name, false)}
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return testpb.NewOrdersClient(conn)
	}
	req := &testpb.CreateOrderRequest{RequestId: "k"}
	alice, alice2, bob := clientAs("alice"), clientAs("alice"), clientAs("bob")
	for _, c := range []testpb.OrdersClient{alice, bob, alice2} {
		_, err := c.CreateOrder(t.Context(), req)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, svc.Runs("create:k"), "alice's renewed certificate is alice")
	_, err = clientAs("").CreateOrder(t.Context(), req)
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key}
}

// issue returns a new certificate, with a new key, for name.
func (ca *testCA) issue(t *testing.T, name string, server bool) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
