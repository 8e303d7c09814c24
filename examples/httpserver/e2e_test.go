package main

// End-to-end tests of the httpserver example: the server, as main runs it
// (its configuration from the environment, through the SDK's loader),
// on free ports of 127.0.0.1, against DynamoDB tables in dynalite or a
// PostgreSQL database, and clients that retry through httpclient.Transport
// over a network that loses requests and replies (lossyproxy). They skip
// without Node.js and dynalite, or PostgreSQL, unless
// IDEMPOTENCY_REQUIRE_INTEGRATION=1.
//
// E2E_SEED replays the random choices of a run: each test logs its seed.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/httpserver/pgpayments"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/examples/payments/payment/paymenttest"
	"github.com/retrysafe/retrysafe/idempotency/httpclient"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/lossyproxy"
	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func TestMain(m *testing.M) { dynalite.Main(stopsPostgres{m}) }

// stopsPostgres runs the tests, then stops the PostgreSQL server that
// pgserver.Shared started, if any.
type stopsPostgres struct{ m *testing.M }

func (s stopsPostgres) Run() int {
	code := s.m.Run()
	pgserver.StopShared()
	return code
}

// stack is the example running: its ledger, and its instances' addresses.
type stack struct {
	// charges reads the ledger.
	charges   func(t *testing.T) []payment.Charge
	instances []string // base URLs
}

// start creates the tables and starts n instances of the server, as main
// does, with the environment pointing them at dynalite; they stop when t
// ends.
func start(t *testing.T, n int) *stack {
	t.Helper()
	srv := dynalite.Shared(t)
	for _, kv := range srv.Env() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	client := srv.NewClient()
	records := srv.NewTable(t, func(ctx context.Context, c *dynamodb.Client, name string) error {
		return ddbstore.CreateTable(ctx, c, name)
	})
	ledger := srv.NewTable(t, func(ctx context.Context, c *dynamodb.Client, name string) error {
		return payment.CreateLedgerTable(ctx, c, name)
	})
	t.Setenv(payment.EnvIdempotencyTable, records)
	t.Setenv(payment.EnvPaymentsTable, ledger)
	s := &stack{charges: func(t *testing.T) []payment.Charge {
		charges, err := payment.ScanLedger(t.Context(), client, ledger)
		require.NoError(t, err)
		return charges
	}}
	s.instances = serve(t, n)
	return s
}

// startPostgres creates the tables in a database of the test's own, and
// starts n instances of the server, as main does, with DATABASE_URL naming
// it; they stop when t ends.
func startPostgres(t *testing.T, n int) *stack {
	t.Helper()
	url := pgserver.Shared(t).NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, pgpayments.CreateTables(t.Context(), pool))
	t.Setenv(EnvDatabaseURL, url)
	t.Setenv(EnvCreateTables, "1") // they exist: nothing to do
	s := &stack{charges: func(t *testing.T) []payment.Charge {
		charges, err := pgpayments.Charges(t.Context(), pool)
		require.NoError(t, err)
		return charges
	}}
	s.instances = serve(t, n)
	return s
}

// serve starts n instances of the server, as main does, configured from
// the environment, and returns their base URLs; they stop when t ends.
func serve(t *testing.T, n int) []string {
	t.Helper()
	var instances []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, ln, slog.New(slog.DiscardHandler)) }()
		t.Cleanup(func() {
			cancel()
			assert.NoError(t, <-done, "a graceful shutdown")
		})
		instances = append(instances, "http://"+ln.Addr().String())
	}
	return instances
}

func TestProtocol(t *testing.T) {
	t.Setenv(EnvCreateTables, "1") // they exist: nothing to do
	s := start(t, 2)
	post := func(instance int, key, body string) (int, string, bool) {
		t.Helper()
		a := paymenttest.Send(t, "POST", s.instances[instance]+"/payments", key, body)
		return a.Status, a.Body, a.Replayed()
	}
	body := `{"amount":1999,"currency":"EUR","customer":"cus_1"}`
	status, first, _ := post(0, "order-1", body)
	require.Equal(t, http.StatusCreated, status, first)
	status, again, replayed := post(1, "order-1", body)
	assert.Equal(t, http.StatusCreated, status)
	assert.True(t, replayed, "the other instance replays")
	assert.Equal(t, first, again)
	status, _, _ = post(1, "order-1", `{"amount":2999,"currency":"EUR","customer":"cus_1"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, status)
	status, _, _ = post(0, "", body)
	assert.Equal(t, http.StatusBadRequest, status)

	charges := s.charges(t)
	require.Len(t, charges, 1)
	assert.Contains(t, first, charges[0].PaymentID)
}

// The PostgreSQL variant, as main runs it with DATABASE_URL: the same
// answers, from either instance.
func TestProtocolOnPostgres(t *testing.T) {
	s := startPostgres(t, 2)
	body := `{"amount":1999,"currency":"EUR","customer":"cus_1"}`
	first := paymenttest.Send(t, "POST", s.instances[0]+"/payments", "order-1", body)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	again := paymenttest.Send(t, "POST", s.instances[1]+"/payments", "order-1", body)
	assert.Equal(t, http.StatusCreated, again.Status)
	assert.True(t, again.Replayed(), "the other instance replays")
	assert.Equal(t, first.Body, again.Body)
	reused := paymenttest.Send(t, "POST", s.instances[1]+"/payments", "order-1", `{"amount":2999,"currency":"EUR","customer":"cus_1"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Status)
	charges := s.charges(t)
	require.Len(t, charges, 1)
	assert.Contains(t, first.Body, charges[0].PaymentID)
}

// Clients that retry through Transport, to two instances, over a network
// that loses a request in five before the server and a reply in five
// after: the ledger holds exactly one charge per key, the one every
// client of the key was told about.
func TestLossyNetwork(t *testing.T) { testLossyNetwork(t, start(t, 2)) }

// The same on PostgreSQL, where each charge's ledger row commits with the
// completion of its key.
func TestLossyNetworkOnPostgres(t *testing.T) { testLossyNetwork(t, startPostgres(t, 2)) }

func testLossyNetwork(t *testing.T, s *stack) {
	const keys, clients, workers = 100, 4, 8
	seed := testenv.Seed(t, "E2E_SEED")
	var proxies []*lossyproxy.Proxy
	for i, url := range s.instances {
		proxies = append(proxies, lossyproxy.Start(t, strings.TrimPrefix(url, "http://"), lossyproxy.Random(seed, uint64(i), 0.2, 0.2)))
	}

	paymentOf := make([][]string, clients) // [client][key]
	var senders []*http.Client
	for c := range clients {
		paymentOf[c] = make([]string, keys)
		senders = append(senders, &http.Client{Transport: &httpclient.Transport{
			Base:        &http.Transport{MaxIdleConnsPerHost: workers},
			MaxAttempts: 40,
			BaseDelay:   10 * time.Millisecond,
			MaxDelay:    200 * time.Millisecond,
		}})
	}
	lossyproxy.Drive(seed, clients, keys, workers, len(proxies), func(c, k, proxy int) {
		key := fmt.Sprintf("e2e-%d-%d", seed, k)
		body := fmt.Sprintf(`{"amount":%d,"currency":"EUR","customer":"cus_%d"}`, 100+k, k)
		req, err := http.NewRequestWithContext(httpclient.WithKey(t.Context(), key), "POST", proxies[proxy].URL+"/payments", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := senders[c].Do(req)
		if !assert.NoError(t, err, key) {
			return
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.NoError(t, err)
		if assert.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", key, data) {
			id, _, _ := strings.Cut(strings.TrimPrefix(string(data), `{"payment_id":"`), `"`)
			paymentOf[c][k] = id
		}
	})

	charges := s.charges(t)
	var ledgerIDs, told, idemKeys []string
	for _, ch := range charges {
		ledgerIDs = append(ledgerIDs, ch.PaymentID)
		idemKeys = append(idemKeys, ch.IdempotencyKey)
	}
	for k := range keys {
		for c := range clients {
			assert.Equal(t, paymentOf[0][k], paymentOf[c][k], "key %d: one payment for every client", k)
		}
		told = append(told, paymentOf[0][k])
	}
	slices.Sort(ledgerIDs)
	slices.Sort(told)
	assert.Len(t, charges, keys, "one charge per key")
	assert.Equal(t, told, ledgerIDs, "the ledger holds exactly the payments the clients were told about")
	slices.Sort(idemKeys)
	assert.Len(t, slices.Compact(idemKeys), keys, "under as many idempotency keys")

	var lostRequests, lostReplies int64
	for _, p := range proxies {
		lostRequests += p.Stats().LostRequests
		lostReplies += p.Stats().LostReplies
	}
	assert.Positive(t, lostRequests)
	assert.Positive(t, lostReplies)
	t.Logf("%d keys × %d clients to %d instances: %d charges; %d requests lost before the server, %d replies after it",
		keys, clients, len(s.instances), len(charges), lostRequests, lostReplies)
}
