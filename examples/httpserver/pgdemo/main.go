// Command pgdemo shows the PostgreSQL variant of the httpserver example
// end to end: the payments API with its idempotency records and its
// ledger in one PostgreSQL database (package pgpayments), each payment's
// ledger row committed in one transaction with the completion of its
// Idempotency-Key. It sends a scripted series of requests, prints what
// each got and what the ledger holds after it, and exits with status 1 if
// anything was not as expected.
//
// Run it with `make demo-postgres`, or
//
//	go -C examples run ./httpserver/pgdemo
//
// With DATABASE_URL set, it uses that database (and creates its tables
// there, if they do not exist); otherwise it starts a throwaway PostgreSQL
// server from the binaries of Debian's postgresql package (initdb into a
// temporary directory, as the tests do) and stops it when it ends, also
// on Ctrl-C.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/examples/httpserver/pgpayments"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/pgserver"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		srv, err := pgserver.StartContext(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgdemo:", err)
			os.Exit(1)
		}
		defer srv.Stop()
		if err := srv.CreateDatabase(ctx, "payments"); err != nil {
			fmt.Fprintln(os.Stderr, "pgdemo:", err)
			srv.Stop()
			os.Exit(1)
		}
		url = srv.URL("payments")
		fmt.Printf("PostgreSQL %s at %s, for this demo only\n", srv.Version, srv.Addr())
	}
	ok, err := run(ctx, os.Stdout, url)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "pgdemo: interrupted")
	case err != nil:
		fmt.Fprintln(os.Stderr, "pgdemo:", err)
	case !ok:
		fmt.Fprintln(os.Stderr, "pgdemo: something was not as expected (marked UNEXPECTED above)")
	default:
		return
	}
	stop()
	os.Exit(1) // the deferred Stop does not run: stop the server first
}

// run serves the API on the database of url, plays the scenario, and
// writes what happened to w. It reports whether everything was as
// expected.
func run(ctx context.Context, w io.Writer, url string) (bool, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return false, err
	}
	defer pool.Close()
	if err := pgpayments.CreateTables(ctx, pool); err != nil {
		return false, err
	}
	store, err := postgres.New(pool, pgpayments.RecordsTable)
	if err != nil {
		return false, err
	}
	h, err := pgpayments.New(pgpayments.Config{Store: store, Demo: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return false, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	d := &demo{ctx: ctx, pool: pool, url: "http://" + ln.Addr().String() + "/payments", run: rand.Text()[:8]}
	fmt.Fprintf(w, "the payments API at %s, its records and ledger in one database\n\n", d.url)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tREQUEST\tANSWER\tLEDGER ROWS\tEXPECTED")
	ok, err := d.play(tw)
	tw.Flush()
	if err != nil {
		return false, err
	}
	if ok {
		fmt.Fprintln(w, "\n3 keys, 3 ledger rows: each payment charged once, its row committed with its key.")
	}
	return ok, nil
}

// demo is the scenario's state.
type demo struct {
	ctx  context.Context
	pool *pgxpool.Pool
	url  string
	run  string // in the keys, so that each run's are new
}

// answer is what a request got: its status, and its payment ID or problem
// type.
type answer struct {
	status   int
	what     string
	replayed bool
}

func (a answer) String() string {
	s := fmt.Sprintf("%d %s", a.status, a.what)
	if a.replayed {
		s += " (replayed)"
	}
	return s
}

const body = `{"amount":1999,"currency":"EUR","customer":"cus_42"}`

func (d *demo) key(n int) string { return fmt.Sprintf("demo-%s-%d", d.run, n) }

// post sends a payment with key and the demonstration header, if any.
func (d *demo) post(key string, header ...string) (answer, error) {
	req, err := http.NewRequestWithContext(d.ctx, "POST", d.url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var decoded struct {
		PaymentID string `json:"payment_id"`
		Type      string `json:"type"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&decoded); err != nil {
		return answer{}, fmt.Errorf("the answer to %s: %w", key, err)
	}
	what := decoded.PaymentID
	if what == "" {
		_, what, _ = strings.Cut(decoded.Type, "#") // the problem's name
	}
	return answer{resp.StatusCode, what, resp.Header.Get(httpapi.HeaderReplayed) == "true"}, nil
}

// rows counts the ledger's rows.
func (d *demo) rows() (int, error) {
	charges, err := pgpayments.Charges(d.ctx, d.pool)
	return len(charges), err
}

// play runs the steps, one line each.
func (d *demo) play(w io.Writer) (bool, error) {
	ok := true
	step := func(name, request string, got answer, wantStatus int, wantReplayed bool, wantRows int, expected string) error {
		rows, err := d.rows()
		if err != nil {
			return err
		}
		mark := expected
		if got.status != wantStatus || got.replayed != wantReplayed || rows != wantRows {
			mark, ok = "UNEXPECTED: "+expected, false
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", name, request, got, rows, mark)
		return nil
	}
	rows0, err := d.rows()
	if err != nil {
		return false, err
	}

	a, err := d.post(d.key(1))
	if err != nil {
		return false, err
	}
	if err := step("1 a payment", "POST key 1", a, http.StatusCreated, false, rows0+1, "charged: its row and its key commit together"); err != nil {
		return false, err
	}
	first := a
	a, err = d.post(d.key(1))
	if err != nil {
		return false, err
	}
	if err := step("2 the same again", "POST key 1", a, http.StatusCreated, true, rows0+1, "the same payment, replayed; no new row"); err != nil {
		return false, err
	}
	if a.what != first.what {
		ok = false
		fmt.Fprintf(w, "\t\t\t\tUNEXPECTED: another payment than the first, %s\n", first.what)
	}

	a, err = d.post(d.key(2), pgpayments.HeaderDemoFailAfterLedger, "1")
	if err != nil {
		return false, err
	}
	if err := step("3 a charge that fails after its row", "POST key 2, failing", a, http.StatusServiceUnavailable, false, rows0+1,
		"not made: its row rolled back with it, the key released"); err != nil {
		return false, err
	}
	a, err = d.post(d.key(2))
	if err != nil {
		return false, err
	}
	if err := step("4 its retry", "POST key 2", a, http.StatusCreated, false, rows0+2, "charged, once"); err != nil {
		return false, err
	}

	// A charge held in its transaction, and a duplicate meanwhile: the
	// demo locks the ledger's table, as a long report or a migration
	// might, and the charge's INSERT waits for the lock. Its reservation
	// committed before its transaction began; its row has not.
	lock, err := d.pool.Begin(d.ctx)
	if err != nil {
		return false, err
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(d.ctx, `LOCK TABLE payments IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return false, err
	}
	held := make(chan error, 1)
	var heldAnswer answer
	go func() {
		var err error
		heldAnswer, err = d.post(d.key(3))
		held <- err
	}()
	if err := d.waitFor(`SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO payments%'`); err != nil {
		return false, err
	}
	a, err = d.post(d.key(3))
	if err != nil {
		return false, err
	}
	if err := step("5 a duplicate while a charge waits", "POST key 3, twice", a, http.StatusConflict, false, rows0+2,
		"409 at once: the reservation is committed, the row not yet"); err != nil {
		return false, err
	}
	if err := lock.Rollback(d.ctx); err != nil {
		return false, err
	}
	if err := <-held; err != nil {
		return false, err
	}
	slowAnswer := heldAnswer
	if err := step("6 the lock goes, the charge goes on", "(the first of key 3)", slowAnswer, http.StatusCreated, false, rows0+3, "charged: its row and its key commit together"); err != nil {
		return false, err
	}
	a, err = d.post(d.key(3))
	if err != nil {
		return false, err
	}
	if err := step("7 the duplicate, retried", "POST key 3", a, http.StatusCreated, true, rows0+3, "that charge's payment, replayed"); err != nil {
		return false, err
	}
	return ok, nil
}

// waitFor waits until the count that query returns is positive.
func (d *demo) waitFor(query string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		err := d.pool.QueryRow(d.ctx, query).Scan(&n)
		switch {
		case err != nil:
			return err
		case n > 0:
			return nil
		case time.Now().After(deadline):
			return errors.New("the charge did not reach the ledger within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
