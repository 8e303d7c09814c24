package main_test

// End-to-end tests of the payments example: its bootstrap binary runs
// under the Lambda Runtime Interface Emulator, as several execution
// environments, against dynalite, and against DynamoDB Local for
// transactions. They skip without Node.js, dynalite, Java, DynamoDB Local
// or the emulator, unless IDEMPOTENCY_REQUIRE_INTEGRATION=1.
//
// E2E_SEED replays the random interleavings of a run: each test logs the
// seed it used.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/payments/localpayments"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/rie"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

var (
	buildDir string
	server   = sync.OnceValues(func() (*dynalite.Server, error) { return dynalite.StartContext(context.Background()) })
	txServer = sync.OnceValues(func() (*dynamodblocal.Server, error) { return dynamodblocal.StartContext(context.Background()) })
	builds   sync.Map // package -> func() (string, error)
)

func TestMain(m *testing.M) {
	var err error
	if buildDir, err = os.MkdirTemp("", "payments-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if srv, err := server(); err == nil {
		srv.Stop()
	}
	if srv, err := txServer(); err == nil {
		srv.Stop()
	}
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// bootstrap returns the binary of a function, built once for the host.
func bootstrap(t testing.TB, pkg string) string {
	t.Helper()
	build, _ := builds.LoadOrStore(pkg, sync.OnceValues(func() (string, error) {
		dir := filepath.Join(buildDir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		return rie.BuildFunction(context.Background(), pkg, dir)
	}))
	path, err := build.(func() (string, error))()
	require.NoError(t, err)
	return path
}

// start starts the example with opts against dynalite, or against
// DynamoDB Local with opts.Transactions, and stops it when t ends.
func start(t testing.TB, opts localpayments.Options) *localpayments.Stack {
	t.Helper()
	var srv localpayments.Server
	var err error
	if opts.Transactions {
		srv, err = txServer()
	} else {
		srv, err = server()
	}
	if err != nil {
		localpayments.SkipOrFail(t, err)
	}
	opts.Bootstrap = bootstrap(t, localpayments.Package)
	s, err := localpayments.Start(t.Context(), srv, opts)
	if err != nil {
		localpayments.SkipOrFail(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, in := range s.Instances {
				t.Logf("last lines of instance %d:\n%s", i, strings.Join(in.Tail(40), "\n"))
			}
		}
		assert.NoError(t, s.Stop())
	})
	return s
}

// bounded returns the context of a wait for something that happens
// within seconds: the bound (testenv.StartTimeout) only keeps a broken
// test from hanging.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.StartTimeout)
	t.Cleanup(cancel)
	return ctx
}

func body(amount int, customer string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"EUR","customer":%q}`, amount, customer)
}

// The protocol, request by request, through one environment.
func TestProtocol(t *testing.T) {
	s := start(t, localpayments.Options{})
	ctx := t.Context()
	post := func(req localpayments.Request) localpayments.Response {
		t.Helper()
		resp, err := s.Post(ctx, 0, req)
		require.NoError(t, err)
		return resp
	}

	first := post(localpayments.Request{Key: "order-1", Body: body(1999, "cus_1")})
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	p, ok := first.Payment()
	require.True(t, ok)
	assert.Equal(t, payment.Payment{PaymentID: p.PaymentID, Amount: 1999, Currency: "EUR", Customer: "cus_1"}, p)
	assert.False(t, first.Replayed())

	again := post(localpayments.Request{Key: "order-1", Body: body(1999, "cus_1")})
	assert.Equal(t, http.StatusCreated, again.Status)
	assert.True(t, again.Replayed())
	assert.Equal(t, first.Body, again.Body)

	reused := post(localpayments.Request{Key: "order-1", Body: body(2999, "cus_1")})
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Status)
	pr, _ := reused.Problem()
	assert.Equal(t, httpapi.ProblemKeyReused, pr.Type)

	missing := post(localpayments.Request{Body: body(1999, "cus_1")})
	assert.Equal(t, http.StatusBadRequest, missing.Status)
	pr, _ = missing.Problem()
	assert.Equal(t, httpapi.ProblemMissingKey, pr.Type)

	invalid := post(localpayments.Request{Key: "order-2", Body: `{"amount":"ten","currency":"EUR","customer":"cus_2"}`})
	assert.Equal(t, http.StatusBadRequest, invalid.Status)
	pr, _ = invalid.Problem()
	assert.Equal(t, payment.ProblemInvalidPayment, pr.Type)
	fixed := post(localpayments.Request{Key: "order-2", Body: body(10, "cus_2")})
	assert.Equal(t, http.StatusCreated, fixed.Status, "the invalid body did not consume the key")

	charges, err := s.Ledger(ctx)
	require.NoError(t, err)
	assert.Len(t, charges, 2)
}

// Under Lambda's tenant isolation mode, two tenants that send one request
// (one key, one body) are charged once each, each gets its own payment,
// and each retry, to any environment, replays its own tenant's payment.
// An invocation without a tenant gets neither.
func TestTenantsKeepTheirOwnPayments(t *testing.T) {
	s := start(t, localpayments.Options{Instances: 2})
	ctx := t.Context()
	post := func(i int, tenant string) localpayments.Response {
		t.Helper()
		resp, err := s.Post(ctx, i, localpayments.Request{Key: "order-1", Body: body(1999, "cus_1"), Tenant: tenant})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, resp.Body)
		return resp
	}
	first := map[string]localpayments.Response{}
	for i, tenant := range []string{"blue", "green", ""} {
		first[tenant] = post(i%2, tenant)
		assert.False(t, first[tenant].Replayed(), "tenant %q is charged", tenant)
	}
	ids := map[string]bool{}
	for tenant, resp := range first {
		p, ok := resp.Payment()
		require.True(t, ok)
		ids[p.PaymentID] = true
		for i := range 2 {
			again := post(i, tenant)
			assert.True(t, again.Replayed(), "tenant %q's retry", tenant)
			assert.Equal(t, resp.Body, again.Body, "tenant %q's retry replays its own payment", tenant)
		}
	}
	assert.Len(t, ids, 3, "a payment each")
	charges, err := s.Ledger(ctx)
	require.NoError(t, err)
	assert.Len(t, charges, 3, "one charge each")
}

// A few hundred requests over a few dozen keys, from concurrent clients,
// to four execution environments, with duplicates that arrive together.
func TestEndToEnd(t *testing.T) {
	s := start(t, localpayments.Options{Instances: 4})
	runWorkload(t, s, workload{keys: 30, requests: 300, clients: 16, seed: testenv.Seed(t, "E2E_SEED")})
}

// The same, with each environment running four invocations at once in one
// process, as Lambda Managed Instances do.
func TestEndToEndMultiConcurrency(t *testing.T) {
	s := start(t, localpayments.Options{Instances: 4, MaxConcurrency: 4})
	runWorkload(t, s, workload{keys: 30, requests: 300, clients: 32, seed: testenv.Seed(t, "E2E_SEED")})

	// The environments did run invocations side by side.
	require.NoError(t, s.Stop()) // then every line is read
	most := 0
	for _, in := range s.Instances {
		most = max(most, maxInFlight(in.Logs()))
	}
	t.Logf("at most %d invocations at once in one environment", most)
	assert.Greater(t, most, 1, "no environment ran two invocations at once")
}

// maxInFlight returns the most invocations that were running at once,
// from the emulator's START and END lines.
func maxInFlight(lines []string) int {
	n, most := 0, 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "START RequestId: "):
			n++
			most = max(most, n)
		case strings.HasPrefix(l, "END RequestId: "):
			n--
		}
	}
	return most
}

type workload struct {
	keys, requests, clients int
	seed                    uint64
}

type call struct {
	key      int
	instance int
}

// runWorkload sends w.requests requests, spread over w.keys keys with one
// body each, in a random order, from w.clients concurrent clients, each
// request to a random environment. About half of the keys have their
// requests sent back to back, so that duplicates arrive together. A client
// that gets 409 (in progress) retries soon, as Retry-After allows. Then it
// checks what a client and the ledger see:
//
//   - every response is 201 or 409, never a 5xx;
//   - every 201 for a key carries the same payment;
//   - the ledger has one item per key, the payments the clients saw.
func runWorkload(t *testing.T, s *localpayments.Stack, w workload) {
	rng := rand.New(rand.NewPCG(w.seed, w.seed^0x9e3779b97f4a7c15))
	bodies := make([]string, w.keys)
	perKey := make([][]call, w.keys)
	for k := range w.keys {
		bodies[k] = body(100+rng.IntN(100_000), fmt.Sprintf("cus_%d", k))
	}
	for i := range w.requests {
		k := i % w.keys // every key at least once
		if i >= w.keys {
			k = rng.IntN(w.keys)
		}
		perKey[k] = append(perKey[k], call{key: k, instance: rng.IntN(len(s.Instances))})
	}
	// Interleave: bursts stay together, the rest is shuffled in between.
	var bursts [][]call
	var singles []call
	for k := range w.keys {
		if rng.IntN(2) == 0 {
			bursts = append(bursts, perKey[k])
		} else {
			singles = append(singles, perKey[k]...)
		}
	}
	rng.Shuffle(len(singles), func(i, j int) { singles[i], singles[j] = singles[j], singles[i] })
	var order []call
	for _, c := range singles {
		if len(bursts) > 0 && rng.IntN(4) == 0 {
			order = append(order, bursts[0]...)
			bursts = bursts[1:]
		}
		order = append(order, c)
	}
	for _, b := range bursts {
		order = append(order, b...)
	}

	keys := make([]string, w.keys)
	prefix := fmt.Sprintf("e2e-%d-", w.seed)
	for k := range keys {
		keys[k] = prefix + strconv.Itoa(k)
	}
	type result struct {
		key       int
		status    int
		paymentID string
		replayed  bool
		conflicts int
		err       error
	}
	results := make(chan result, len(order))
	calls := make(chan call)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for c := range w.clients {
		jitter := rand.New(rand.NewPCG(w.seed, uint64(c)))
		wg.Go(func() {
			for c := range calls {
				r := result{key: c.key}
				for {
					resp, err := s.Post(ctx, c.instance, localpayments.Request{Key: keys[c.key], Body: bodies[c.key]})
					if err != nil {
						r.err = err
						break
					}
					r.status = resp.Status
					if resp.Status == http.StatusConflict && r.conflicts < 200 {
						// Retry-After is the first request's deadline;
						// retrying sooner is harmless.
						r.conflicts++
						time.Sleep(time.Duration(5+jitter.IntN(20)) * time.Millisecond)
						continue
					}
					if p, ok := resp.Payment(); ok {
						r.paymentID, r.replayed = p.PaymentID, resp.Replayed()
					} else {
						r.err = fmt.Errorf("status %d: %s %v", resp.Status, resp.Body, resp.Err)
					}
					break
				}
				results <- r
			}
		})
	}
	started := time.Now()
	for _, c := range order {
		calls <- c
	}
	close(calls)
	wg.Wait()
	close(results)
	elapsed := time.Since(started)

	paymentOf := map[int]string{}
	replays, conflicts, fresh := 0, 0, 0
	for r := range results {
		conflicts += r.conflicts
		if !assert.NoError(t, r.err, "key %s", keys[r.key]) {
			continue
		}
		assert.Equal(t, http.StatusCreated, r.status)
		if prev, ok := paymentOf[r.key]; ok {
			assert.Equal(t, prev, r.paymentID, "key %s got two payments", keys[r.key])
		} else {
			paymentOf[r.key] = r.paymentID
		}
		if r.replayed {
			replays++
		} else {
			fresh++
		}
	}
	t.Logf("%d requests over %d keys to %d environments in %v: %d charged, %d replayed, %d answers 409 (retried)",
		len(order), w.keys, len(s.Instances), elapsed.Round(time.Millisecond), fresh, replays, conflicts)
	assert.Equal(t, w.keys, fresh, "one response per key ran the charge")

	charges, err := s.Ledger(t.Context())
	require.NoError(t, err)
	assert.Len(t, charges, w.keys, "ledger items = distinct keys")
	var ledgerIDs, seenIDs, idemKeys []string
	for _, c := range charges {
		ledgerIDs = append(ledgerIDs, c.PaymentID)
		idemKeys = append(idemKeys, c.IdempotencyKey)
	}
	for _, id := range paymentOf {
		seenIDs = append(seenIDs, id)
	}
	slices.Sort(ledgerIDs)
	slices.Sort(seenIDs)
	assert.Equal(t, seenIDs, ledgerIDs, "the ledger holds exactly the payments the clients got")
	slices.Sort(idemKeys)
	assert.Len(t, slices.Compact(idemKeys), w.keys, "one charge per idempotency key")
}

// killTimeout is the function's timeout in the tests that kill an
// invocation at its deadline. The retry after the kill runs in the same
// timeout, and starts a new runtime first: about half a second on an idle
// machine, several on a loaded one (2 seconds were seen to be too short).
// Eight seconds keep the retry safe at ten times the idle time.
const killTimeout = 8 * time.Second

// An invocation killed at its deadline (the emulator's timeout) before it
// charged holds its key only until that deadline: a retry right after it
// charges, once, without waiting for the record's 24-hour expiry.
func TestKilledMidRequest(t *testing.T) {
	const timeout = killTimeout
	s := start(t, localpayments.Options{Instances: 2, Timeout: timeout, DemoDelay: true})
	ctx := t.Context()
	req := localpayments.Request{Key: "killed-1", Body: body(4200, "cus_k")}
	slow := req
	slow.Headers = map[string]string{payment.HeaderDemoDelay: "30s"}

	killed := make(chan localpayments.Response, 1)
	go func() {
		resp, err := s.Post(ctx, 0, slow)
		assert.NoError(t, err)
		killed <- resp
	}()

	// While the slow invocation holds the key, a retry elsewhere is told
	// to come back.
	require.NoError(t, s.WaitInProgress(bounded(t)))
	busy, err := s.Post(ctx, 1, req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, busy.Status, busy.Body)
	retryAfter, err := strconv.Atoi(busy.Headers["Retry-After"])
	require.NoError(t, err)
	assert.LessOrEqual(t, retryAfter, int(timeout/time.Second), "the reservation lasts until the deadline, not the expiry")

	resp := <-killed
	assert.Equal(t, http.StatusGatewayTimeout, resp.Status, "timed out: %v", resp.Err)
	charges, err := s.Ledger(ctx)
	require.NoError(t, err)
	assert.Empty(t, charges, "the killed invocation charged nothing")
	reports, err := s.Instances[0].WaitInitReports(bounded(t), 1)
	require.NoError(t, err)

	// Right after the deadline: the same environment, which starts a new
	// runtime process (the old one was killed).
	retry, err := s.Post(ctx, 0, req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, retry.Status, retry.Body)
	assert.False(t, retry.Replayed())
	_, err = s.Instances[0].WaitInitReports(bounded(t), len(reports)+1)
	assert.NoError(t, err, "the killed runtime was replaced")

	replay, err := s.Post(ctx, 1, req)
	require.NoError(t, err)
	assert.True(t, replay.Replayed())
	assert.Equal(t, retry.Body, replay.Body)

	charges, err = s.Ledger(ctx)
	require.NoError(t, err)
	assert.Len(t, charges, 1, "charged once in total")
}

// An invocation killed after its ledger entry and before its key
// completes: with the entry written directly, the retry after the deadline
// charges a second time (the limit docs/guarantees.md describes); with the
// entry staged, the killed invocation wrote nothing, and the retry writes
// the only entry. In steps, the killed invocation stored its charge and
// its ledger entry, and the retry resumes after them with the email: one
// entry, the killed invocation's.
func TestKilledBetweenTheLedgerAndTheCompletion(t *testing.T) {
	const timeout = killTimeout
	for _, tc := range []struct {
		name         string
		transactions bool
		steps        bool
		entries      int
	}{
		{"direct", false, false, 2},
		{"staged", true, false, 1},
		{"steps", false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, localpayments.Options{Timeout: timeout, DemoDelay: true, Transactions: tc.transactions, Steps: tc.steps})
			ctx := t.Context()
			req := localpayments.Request{Key: "killed-after-ledger", Body: body(4200, "cus_l")}
			slow := req
			slow.Headers = map[string]string{payment.HeaderDemoDelayAfterLedger: "30s"}

			killed, err := s.Post(ctx, 0, slow)
			require.NoError(t, err)
			require.Equal(t, http.StatusGatewayTimeout, killed.Status, "timed out: %v", killed.Err)
			charges, err := s.Ledger(ctx)
			require.NoError(t, err)
			left := tc.entries - 1
			if tc.steps {
				left = 1 // its stored ledger step
			}
			assert.Len(t, charges, left, "entries left by the killed invocation")

			retry, err := s.Post(ctx, 0, req)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, retry.Status, retry.Body)
			assert.False(t, retry.Replayed())
			replay, err := s.Post(ctx, 0, req)
			require.NoError(t, err)
			assert.True(t, replay.Replayed())

			charges, err = s.Ledger(ctx)
			require.NoError(t, err)
			assert.Len(t, charges, tc.entries)
			p, ok := retry.Payment()
			require.True(t, ok)
			assert.Contains(t, paymentIDs(charges), p.PaymentID, "the retry's entry is in the ledger")
		})
	}
}

func paymentIDs(charges []payment.Charge) []string {
	var ids []string
	for _, c := range charges {
		ids = append(ids, c.PaymentID)
	}
	return ids
}

// BenchmarkColdStart measures the init phase of functions under the
// emulator (their INIT REPORT), alternating between them in one run: a
// bare lambda.Start hello-world; sdk, a handler with the DynamoDB client
// a function builds at init anyway; wrapped, the same handler made
// idempotent (the store and Wrap with a JMESPath key: what the library
// adds to sdk's init); and the payments function. Each iteration starts a
// new execution environment of each and invokes it once. Nothing is sent
// to DynamoDB during init, so no server is needed. The functions run with
// GODEBUG=inittrace=1, and retrysafe-pkginit-ms is the time the
// library's packages took to initialise in the wrapped function, by the
// runtime's own count.
//
//	go test -run '^$' -bench ColdStart -benchtime 20x ./examples/payments
func BenchmarkColdStart(b *testing.B) {
	env := []string{
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x",
		dynalite.EndpointEnv + "=http://127.0.0.1:1", "GODEBUG=inittrace=1",
	}
	functions := []struct {
		name, pkg string
		env       []string
	}{
		{"hello", filepath.Join(repoRoot(b), "internal", "testing", "rie", "testdata", "hello"), []string{"GODEBUG=inittrace=1"}},
		{"sdk", localpayments.Package + "/coldstart/sdk", env},
		{"wrapped", localpayments.Package + "/coldstart/wrapped", env},
		{"payments", localpayments.Package, append([]string{
			payment.EnvIdempotencyTable + "=idempotency", payment.EnvPaymentsTable + "=payments",
		}, env...)},
	}
	total := make([]time.Duration, len(functions))
	var pkgInit time.Duration
	for b.Loop() {
		for i, fn := range functions {
			in, err := rie.StartContext(b.Context(), rie.Config{Bootstrap: bootstrap(b, fn.pkg), Env: fn.env})
			if err != nil {
				localpayments.SkipOrFail(b, err)
			}
			_, err = in.Invoke(b.Context(), []byte(`{}`))
			require.NoError(b, err)
			reports, err := in.WaitInitReports(b.Context(), 1)
			require.NoError(b, err)
			total[i] += reports[0].Duration
			if fn.name == "wrapped" {
				pkgInit += localpayments.PackageInit(in.Logs(), "github.com/retrysafe/")
			}
			require.NoError(b, in.Stop())
		}
	}
	for i, fn := range functions {
		b.ReportMetric(float64(total[i].Microseconds())/1000/float64(b.N), fn.name+"-init-ms")
	}
	b.ReportMetric(float64(pkgInit.Microseconds())/1000/float64(b.N), "retrysafe-pkginit-ms")
	b.ReportMetric(0, "ns/op")
}

// repoRoot returns the repository's root, where the library's own packages
// and test functions are.
func repoRoot(tb testing.TB) string {
	root, err := testenv.RepoRoot()
	require.NoError(tb, err)
	return root
}
