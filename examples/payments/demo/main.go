// Command demo shows the payments example's exactly-once behaviour on real
// parts: the example's bootstrap binary runs under the AWS Lambda Runtime
// Interface Emulator, as four execution environments, against dynalite.
// It plays a scripted scenario, prints what happened as a table, and exits
// with status 1 if anything was not as expected. Two of its steps show
// what transactions change; the second runs on DynamoDB Local, which runs
// on Java: without Java, or DynamoDB Local, it is skipped, and the demo
// says what to install. The next kills a function in steps between two of
// them, and its retry resumes.
//
// Run it with `make demo`, which installs dynalite and DynamoDB Local
// first, or, with them installed (npm ci, make dynamodb-local),
//
//	go run ./examples/payments/demo [-v]
//
// -v prints the emulators' and the function's output. Everything the
// demo starts is stopped when it ends, also on Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/retrysafe/retrysafe/examples/payments/localpayments"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/rie"
)

const (
	instances = 4
	timeout   = 2 * time.Second
)

func main() {
	verbose := flag.Bool("v", false, "print the output of the emulators and the function")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, os.Stdout, *verbose)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "demo: interrupted")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	case !ok:
		os.Exit(1)
	}
}

// run sets everything up, plays the scenario and tears everything down.
// It reports whether every expectation held.
func run(ctx context.Context, out io.Writer, verbose bool) (bool, error) {
	fmt.Fprintln(out, "Building the payments example and the Lambda Runtime Interface Emulator...")
	dir, err := os.MkdirTemp("", "retrysafe-demo-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	bootstrap, err := localpayments.Build(ctx, dir)
	if err != nil {
		return false, err
	}
	if _, err := rie.Binary(ctx); err != nil {
		return false, err
	}

	srv, err := dynalite.StartContext(ctx)
	if errors.Is(err, dynalite.ErrUnavailable) {
		return false, fmt.Errorf("%w (make demo installs it)", err)
	}
	if err != nil {
		return false, err
	}
	defer srv.Stop()

	var logs io.Writer
	if verbose {
		logs = &prefixWriter{w: os.Stderr, prefix: "    | "}
	}
	stack, err := localpayments.Start(ctx, srv, localpayments.Options{
		Bootstrap: bootstrap,
		Instances: instances,
		Timeout:   timeout,
		DemoDelay: true,
		Output:    logs,
	})
	if err != nil {
		return false, err
	}
	defer stack.Stop()

	where := "dynalite " + srv.Version
	if srv.External {
		where = "the DynamoDB endpoint"
	}
	fmt.Fprintf(out, "\n%s at %s, tables %s and %s\n", where, srv.Endpoint, stack.IdempotencyTable, stack.PaymentsTable)
	fmt.Fprintf(out, "%d execution environments (aws-lambda-rie %s), function timeout %v\n\n", instances, rie.Version[len(rie.Version)-12:], timeout)

	d := &demo{ctx: ctx, stack: stack, run: time.Now().Format("150405"), ok: true,
		bootstrap: bootstrap, dynalite: srv, logs: logs}
	d.scenario()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tREQUEST\tEXPECTED\tGOT\tRESULT")
	for i, r := range d.rows {
		v := verdict(r.ok)
		if d.skipped[i] {
			v = "SKIP"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, r.request, r.expected, r.got, v)
	}
	if err := tw.Flush(); err != nil {
		return false, err
	}
	for _, n := range d.notes {
		fmt.Fprintf(out, "\n%s\n", n)
	}

	charges, err := stack.Ledger(ctx)
	if err != nil {
		return false, err
	}
	ledgerOK := len(charges) == len(d.keys)
	d.ok = d.ok && ledgerOK
	fmt.Fprintf(out, "\nLedger: %d items for %d distinct keys (%s)  %s\n",
		len(charges), len(d.keys), strings.Join(d.keys, ", "), verdict(ledgerOK))

	var inits []string
	for _, in := range stack.Instances {
		for _, r := range in.InitReports() {
			inits = append(inits, fmt.Sprintf("%.1f ms", float64(r.Duration.Microseconds())/1000))
		}
	}
	fmt.Fprintf(out, "Init durations, one per runtime process started (INIT REPORT): %s\n", strings.Join(inits, ", "))
	if line, err := coldStarts(ctx, dir, srv.Endpoint); err != nil {
		fmt.Fprintf(out, "What the library adds to an init: not measured (%v)\n", err)
	} else {
		fmt.Fprintln(out, line)
	}
	if d.ok {
		fmt.Fprintln(out, "\nEvery expectation held.")
	} else {
		fmt.Fprintln(out, "\nSome expectations failed.")
	}
	return d.ok, nil
}

func verdict(ok bool) string {
	if ok {
		return "OK"
	}
	return "FAIL"
}

type row struct {
	request, expected, got string
	ok                     bool
}

type demo struct {
	ctx   context.Context
	stack *localpayments.Stack
	// bootstrap, dynalite and logs start the stacks of the transactions
	// steps.
	bootstrap string
	dynalite  *dynalite.Server
	logs      io.Writer
	run       string   // makes the keys of this run unique
	keys      []string // the keys that must have been charged once each
	rows      []row
	// skipped marks the rows of steps that cannot run here, and notes say
	// what they need.
	skipped map[int]bool
	notes   []string
	ok      bool
	n       int // round-robin over the environments
}

func (d *demo) add(r row) {
	d.rows = append(d.rows, r)
	d.ok = d.ok && r.ok
}

func (d *demo) key(name string) string { return "demo-" + d.run + "-" + name }

// post sends req to the next environment.
func (d *demo) post(req localpayments.Request) localpayments.Response {
	i := d.n % len(d.stack.Instances)
	d.n++
	return d.postTo(i, req)
}

func (d *demo) postTo(i int, req localpayments.Request) localpayments.Response {
	resp, err := d.stack.Post(d.ctx, i, req)
	if err != nil {
		return localpayments.Response{Err: err}
	}
	return resp
}

func body(amount int, customer string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"EUR","customer":%q}`, amount, customer)
}

// describe summarises a response for the GOT column.
func describe(r localpayments.Response) string {
	if r.Status == 0 {
		return "error: " + r.Err.Error()
	}
	s := strconv.Itoa(r.Status)
	if p, ok := r.Payment(); ok {
		s += " " + abbrev(p.PaymentID)
	}
	if r.Replayed() {
		s += ", Idempotent-Replayed: true"
	}
	if p, ok := r.Problem(); ok {
		s += " " + p.Type[strings.LastIndexByte(p.Type, '#')+1:]
	}
	if ra := r.Headers["Retry-After"]; ra != "" {
		s += ", Retry-After: " + ra
	}
	var fe *rie.FunctionError
	switch {
	case errors.As(r.Err, &fe) && fe.Type == rie.TimeoutType:
		s += " (" + fe.Message + ")"
	case r.Err != nil:
		s += " (" + r.Err.Error() + ")"
	}
	return s
}

// abbrev shortens a payment ID for the table: the first characters tell
// payments apart.
func abbrev(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}

func problemType(r localpayments.Response) string {
	p, _ := r.Problem()
	return p.Type
}

func (d *demo) ledgerSize() int {
	charges, err := d.stack.Ledger(d.ctx)
	if err != nil {
		return -1
	}
	return len(charges)
}

func (d *demo) scenario() {
	k1 := d.key("k1")
	req := localpayments.Request{Key: k1, Body: body(1999, "cus_ada")}
	first := d.post(req)
	p1, ok := first.Payment()
	d.add(row{"POST " + short(k1) + " " + req.Body, "201 new payment", describe(first),
		ok && first.Status == http.StatusCreated && !first.Replayed()})
	d.keys = append(d.keys, short(k1))

	again := d.post(req)
	p2, _ := again.Payment()
	d.add(row{"the same request again", "201, Idempotent-Replayed: true, same payment_id", describe(again),
		again.Status == http.StatusCreated && again.Replayed() && p2.PaymentID == p1.PaymentID && p1.PaymentID != ""})

	reused := d.post(localpayments.Request{Key: k1, Body: body(2999, "cus_ada")})
	d.add(row{"same key, amount 2999", "422 key-reused", describe(reused),
		reused.Status == http.StatusUnprocessableEntity && problemType(reused) == httpapi.ProblemKeyReused})

	missing := d.post(localpayments.Request{Body: body(1999, "cus_ada")})
	d.add(row{"no Idempotency-Key header", "400 missing-key", describe(missing),
		missing.Status == http.StatusBadRequest && problemType(missing) == httpapi.ProblemMissingKey})

	k2 := d.key("k2")
	invalid := d.post(localpayments.Request{Key: k2, Body: `{"amount":"ten","currency":"EUR","customer":"cus_bob"}`})
	d.add(row{"POST " + short(k2) + ` with "amount":"ten"`, "400 invalid-payment", describe(invalid),
		invalid.Status == http.StatusBadRequest && problemType(invalid) == payment.ProblemInvalidPayment})
	fixed := d.post(localpayments.Request{Key: k2, Body: body(1000, "cus_bob")})
	_, ok = fixed.Payment()
	d.add(row{"corrected body, same key", "201 new payment", describe(fixed),
		ok && !fixed.Replayed()})
	d.keys = append(d.keys, short(k2))

	d.concurrent()
	d.killed()
	d.transactions()
	d.steps()
	d.tenants()
}

// tenants sends one request, with one key and one body, as two tenants of
// a function in Lambda's tenant isolation mode (the emulator's
// X-Amz-Tenant-Id): the tenant scopes the key, so each tenant is charged
// once, and each retry replays that tenant's own payment.
func (d *demo) tenants() {
	k7 := d.key("k7")
	before := d.ledgerSize()
	first := map[string]payment.Payment{}
	var got []string
	ok := true
	for _, tenant := range []string{"blue", "green"} {
		r := d.post(localpayments.Request{Key: k7, Body: body(700, "cus_fay"), Tenant: tenant})
		p, charged := r.Payment()
		first[tenant] = p
		got = append(got, tenant+" "+describe(r))
		ok = ok && charged && !r.Replayed()
	}
	charges := d.ledgerSize() - before
	d.add(row{"POST " + short(k7) + " as tenant blue, then green (same key and body)", "201 new payment each; ledger +2",
		fmt.Sprintf("%s; ledger +%d", strings.Join(got, ", "), charges),
		ok && charges == 2 && first["blue"].PaymentID != first["green"].PaymentID})
	d.keys = append(d.keys, short(k7)+" (blue)", short(k7)+" (green)")

	got, ok = nil, true
	for _, tenant := range []string{"green", "blue"} {
		r := d.post(localpayments.Request{Key: k7, Body: body(700, "cus_fay"), Tenant: tenant})
		p, _ := r.Payment()
		got = append(got, tenant+" "+describe(r))
		ok = ok && r.Replayed() && p.PaymentID == first[tenant].PaymentID && p.PaymentID != ""
	}
	d.add(row{"each tenant's retry", "each replays its own payment_id", strings.Join(got, ", "), ok})
}

// concurrent sends ten requests with one new key at once, to all the
// environments. The charge takes half a second (the demo delay), so some
// duplicates find it in progress (409) and retry shortly after, as
// Retry-After allows.
func (d *demo) concurrent() {
	k3 := d.key("k3")
	req := localpayments.Request{Key: k3, Body: body(500, "cus_cy"), Headers: map[string]string{payment.HeaderDemoDelay: "500ms"}}
	before := d.ledgerSize()
	var mu sync.Mutex
	var wg sync.WaitGroup
	ids := map[string]bool{}
	charged, replayed, conflicts, failed := 0, 0, 0, 0
	for i := range 10 {
		wg.Go(func() {
			for {
				r := d.postTo(i%len(d.stack.Instances), req)
				mu.Lock()
				if r.Status == http.StatusConflict && conflicts < 100 {
					conflicts++
					mu.Unlock()
					time.Sleep(200 * time.Millisecond)
					continue
				}
				if p, ok := r.Payment(); ok {
					ids[p.PaymentID] = true
					if r.Replayed() {
						replayed++
					} else {
						charged++
					}
				} else {
					failed++
				}
				mu.Unlock()
				return
			}
		})
	}
	wg.Wait()
	charges := d.ledgerSize() - before
	var list []string
	for id := range ids {
		list = append(list, abbrev(id))
	}
	got := fmt.Sprintf("%d charged, %d replayed (%d× 409, retried), %s; ledger +%d", charged, replayed, conflicts, strings.Join(list, " "), charges)
	if failed > 0 {
		got += fmt.Sprintf("; %d failed", failed)
	}
	ok := charged == 1 && replayed == 9 && len(ids) == 1 && charges == 1
	d.add(row{"10 concurrent requests, one new key " + short(k3), "one charge, one payment_id", got, ok})
	d.keys = append(d.keys, short(k3))
}

// killed sends a request that sleeps 30 s before it charges: the emulator
// kills the function at its 2 s deadline. A duplicate meanwhile gets 409;
// a retry right after the deadline charges, without waiting for the
// record's 24-hour expiry.
func (d *demo) killed() {
	k4 := d.key("k4")
	req := localpayments.Request{Key: k4, Body: body(4200, "cus_dee")}
	slow := req
	slow.Headers = map[string]string{payment.HeaderDemoDelay: "30s"}
	before := d.ledgerSize()

	started := time.Now()
	done := make(chan localpayments.Response, 1)
	go func() { done <- d.postTo(0, slow) }()
	var busy localpayments.Response
	if err := d.stack.WaitInProgress(d.ctx); err == nil {
		busy = d.postTo(1, req)
	} else {
		busy.Err = err
	}
	killed := <-done
	took := time.Since(started)
	after := d.ledgerSize()

	d.add(row{"POST " + short(k4) + " that waits 30s before charging", fmt.Sprintf("killed at %v: 504, no charge", timeout),
		fmt.Sprintf("%s after %.1fs; ledger +%d", describe(killed), took.Seconds(), after-before),
		killed.Status == http.StatusGatewayTimeout && after == before})
	ra, _ := strconv.Atoi(busy.Headers["Retry-After"])
	d.add(row{"same request meanwhile, elsewhere", fmt.Sprintf("409 key-in-use, Retry-After ≤ %d", int(timeout/time.Second)), describe(busy),
		busy.Status == http.StatusConflict && problemType(busy) == httpapi.ProblemKeyInUse && ra >= 1 && ra <= int(timeout/time.Second)})

	retry := d.postTo(0, req)
	_, ok := retry.Payment()
	d.add(row{"retry right after the deadline", "201 new payment, no 24h wait",
		fmt.Sprintf("%s; ledger +%d", describe(retry), d.ledgerSize()-before), ok && !retry.Replayed() && d.ledgerSize() == before+1})
	d.keys = append(d.keys, short(k4))
}

// transactions kills an invocation after its ledger entry and before its
// key completes, and retries after the deadline: with the entry written
// directly (dynalite, PAYMENTS_TRANSACTIONS=0) the retry charges again;
// with it staged (DynamoDB Local), the killed invocation wrote nothing and
// the retry writes the only entry. Each runs on a stack of its own, so the
// main ledger's check is not affected.
func (d *demo) transactions() {
	req := localpayments.Request{Key: d.key("k5"), Body: body(1500, "cus_eve"),
		Headers: map[string]string{payment.HeaderDemoDelayAfterLedger: "30s"}}
	d.afterLedger("direct write, dynalite", d.dynalite, false, req, 2,
		"504, ledger 1; retry 201, ledger 2 (the limit)")

	srv, err := dynamodblocal.StartContext(d.ctx)
	if errors.Is(err, dynamodblocal.ErrUnavailable) {
		step := len(d.rows) + 1
		d.skipped = map[int]bool{len(d.rows): true}
		got, note := unavailable(err)
		d.add(row{"POST " + short(req.Key) + " killed after its ledger entry, retried (staged in the completion, DynamoDB Local)",
			"504, ledger 0; retry 201, ledger 1", got, true})
		d.notes = append(d.notes, fmt.Sprintf("Step %d was skipped: %s", step, note))
		return
	}
	if err != nil {
		d.add(row{"the same, staged in the completion (DynamoDB Local)", "504, ledger 0; retry 201, ledger 1", "error: " + err.Error(), false})
		return
	}
	defer srv.Stop()
	d.afterLedger("staged in the completion, DynamoDB Local", srv, true, req, 1,
		"504, ledger 0; retry 201, ledger 1")
}

// steps kills an invocation of the function in steps (PAYMENTS_STEPS=1,
// on dynalite) between its ledger step and its email step, and retries
// after the deadline. The retry takes the lapsed key over and resumes: it
// replays the stored charge and ledger steps and runs the email step. The
// ledger keeps one entry, and the retry answers with its payment. It runs
// on a stack of its own, so the main ledger's check is not affected.
func (d *demo) steps() {
	k6 := d.key("k6")
	req := localpayments.Request{Key: k6, Body: body(1200, "cus_gus"),
		Headers: map[string]string{payment.HeaderDemoDelayAfterLedger: "30s"}}
	what := "POST " + short(k6) + " in steps, killed between its ledger and email steps, retried (dynalite)"
	expected := "504, ledger 1; retry 201 with that entry's payment, ledger 1"
	stack, err := localpayments.Start(d.ctx, d.dynalite, localpayments.Options{
		Bootstrap: d.bootstrap, Timeout: timeout, DemoDelay: true, Steps: true, Output: d.logs,
	})
	if err != nil {
		d.add(row{what, expected, "error: " + err.Error(), false})
		return
	}
	defer stack.Stop()
	killed, _ := stack.Post(d.ctx, 0, req)
	afterKill, err := stack.Ledger(d.ctx)
	if err != nil {
		d.add(row{what, expected, "error: " + err.Error(), false})
		return
	}
	retry := req
	retry.Headers = nil
	again, _ := stack.Post(d.ctx, 0, retry)
	charges, err := stack.Ledger(d.ctx)
	if err != nil {
		d.add(row{what, expected, "error: " + err.Error(), false})
		return
	}
	p, charged := again.Payment()
	same := len(afterKill) == 1 && charged && p.PaymentID == afterKill[0].PaymentID
	got := fmt.Sprintf("%d, ledger %d; retry %s (same payment: %v), ledger %d", killed.Status, len(afterKill), describe(again), same, len(charges))
	d.add(row{what, expected, got,
		killed.Status == http.StatusGatewayTimeout && same && !again.Replayed() && len(charges) == 1})
}

// unavailable says, for the table and in a note, what the transactions
// step needs that is not installed: Java, to run DynamoDB Local, or
// DynamoDB Local itself, as err (from dynamodblocal.StartContext) details.
func unavailable(err error) (got, note string) {
	if _, javaErr := exec.LookPath("java"); javaErr != nil {
		return "skipped: no Java (see below)",
			"DynamoDB Local, the server of the transactions, runs on Java 11 or later, which is not installed. " +
				"Install Java (`apt-get install default-jre-headless` on Debian or Ubuntu, `brew install openjdk` on macOS), " +
				"and make demo runs the step."
	}
	return "skipped: no DynamoDB Local (see below)",
		"DynamoDB Local, the server of the transactions, is not installed: `make demo` installs it (make dynamodb-local). " +
			"(" + strings.TrimPrefix(err.Error(), dynamodblocal.ErrUnavailable.Error()+": ") + ")"
}

// afterLedger plays the transactions step on srv: the killed request, then
// its retry without the delay. want is the ledger's size in the end.
func (d *demo) afterLedger(what string, srv localpayments.Server, transactions bool, req localpayments.Request, want int, expected string) {
	stack, err := localpayments.Start(d.ctx, srv, localpayments.Options{
		Bootstrap: d.bootstrap, Timeout: timeout, DemoDelay: true, Transactions: transactions, Output: d.logs,
	})
	if err != nil {
		d.add(row{what, expected, "error: " + err.Error(), false})
		return
	}
	defer stack.Stop()
	size := func() int {
		charges, err := stack.Ledger(d.ctx)
		if err != nil {
			return -1
		}
		return len(charges)
	}
	killed, _ := stack.Post(d.ctx, 0, req)
	afterKill := size()
	retry := req
	retry.Headers = nil
	again, _ := stack.Post(d.ctx, 0, retry)
	got := fmt.Sprintf("%d, ledger %d; retry %s, ledger %d", killed.Status, afterKill, describe(again), size())
	d.add(row{"POST " + short(req.Key) + " killed after its ledger entry, retried (" + what + ")", expected, got,
		killed.Status == http.StatusGatewayTimeout && afterKill == want-1 && again.Status == http.StatusCreated && size() == want})
}

// short drops the run's prefix from a key, for the table.
func short(key string) string { return key[strings.LastIndexByte(key, '-')+1:] }

// prefixWriter indents each line written to it.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

// Write writes b with each of its lines indented.
func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			if _, err := io.WriteString(p.w, p.prefix+line); err != nil {
				return 0, err
			}
		}
	}
	return len(b), nil
}

// coldStartRuns is how many execution environments of each cold-start
// function coldStarts starts, alternating between them.
const coldStartRuns = 3

// coldStarts measures what the library adds to a function's init: the
// INIT REPORTs of a handler with the DynamoDB client a function builds
// anyway (coldstart/sdk) and of the same handler made idempotent, the
// store built and the handler wrapped with a JMESPath key
// (coldstart/wrapped), a few environments of each, alternating; and the
// init of the library's packages in the wrapped one, by the Go runtime's
// count (GODEBUG=inittrace=1). Neither sends a request at init.
func coldStarts(ctx context.Context, dir, endpoint string) (string, error) {
	env := []string{"AWS_REGION=" + dynalite.Region, "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x",
		dynalite.EndpointEnv + "=" + endpoint, "GODEBUG=inittrace=1"}
	var (
		bins    [2]string
		inits   [2][]time.Duration
		pkgInit []time.Duration
	)
	for i, name := range []string{"sdk", "wrapped"} {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return "", err
		}
		bin, err := rie.BuildFunction(ctx, localpayments.Package+"/coldstart/"+name, sub)
		if err != nil {
			return "", err
		}
		bins[i] = bin
	}
	for range coldStartRuns {
		for i, bin := range bins {
			in, err := rie.StartContext(ctx, rie.Config{Bootstrap: bin, Env: env})
			if err != nil {
				return "", err
			}
			_, err = in.Invoke(ctx, []byte(`{"body":"{\"order_id\":\"cold\"}"}`))
			var reports []rie.InitReport
			if err == nil {
				reports, err = in.WaitInitReports(ctx, 1)
			}
			if err == nil {
				inits[i] = append(inits[i], reports[0].Duration)
				if i == 1 {
					pkgInit = append(pkgInit, localpayments.PackageInit(in.Logs(), "github.com/retrysafe/"))
				}
			}
			if stopErr := in.Stop(); err == nil {
				err = stopErr
			}
			if err != nil {
				return "", err
			}
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	ms := func(ds []time.Duration) string {
		return fmt.Sprintf("%.1f ms", float64(median(ds).Microseconds())/1000)
	}
	return fmt.Sprintf("What the library adds to an init, medians of %d environments each (INIT REPORT): a handler with its DynamoDB client %s, "+
		"the same handler wrapped (the store, and Wrap with a JMESPath key) %s; the library's packages initialise in %s (GODEBUG=inittrace=1)",
		coldStartRuns, ms(inits[0]), ms(inits[1]), fmt.Sprintf("%.2f ms", float64(median(pkgInit).Microseconds())/1000)), nil
}
