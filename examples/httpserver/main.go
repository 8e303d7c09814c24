// Command httpserver is the payments API of examples/payments as a net/http
// server: POST /payments charges a customer once per Idempotency-Key,
// behind httpapi.Middleware, on the DynamoDB store; or, with DATABASE_URL,
// with its records and ledger in PostgreSQL, each ledger row committed
// with the completion of its key. See README.md, and packages
// paymentserver and pgpayments for the handlers.
//
// Configuration comes from the environment: IDEMPOTENCY_TABLE and
// PAYMENTS_TABLE name the DynamoDB tables, or DATABASE_URL the PostgreSQL
// database (a postgres:// URL), PORT the port to listen on (default 8080,
// as Lambda Web Adapter expects), CREATE_TABLES=1 creates the tables
// (local runs only), and the AWS SDK reads its own variables (AWS_REGION,
// AWS_ENDPOINT_URL_DYNAMODB, credentials).
// SIGTERM and SIGINT stop it gracefully: the requests in flight finish,
// and complete their keys.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/examples/httpserver/paymentserver"
	"github.com/retrysafe/retrysafe/examples/httpserver/pgpayments"
	"github.com/retrysafe/retrysafe/examples/internal/sdkconfig"
	"github.com/retrysafe/retrysafe/examples/payments/payment"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// Environment variables of the server, besides payment.EnvIdempotencyTable
// and payment.EnvPaymentsTable.
const (
	// EnvPort names the port to listen on.
	EnvPort = "PORT"
	// EnvCreateTables set to 1 creates the tables when they do not exist:
	// for local runs against dynalite, DynamoDB Local or a local
	// PostgreSQL only.
	EnvCreateTables = "CREATE_TABLES"
	// EnvDatabaseURL, when set, is the PostgreSQL database of the
	// records and the ledger, instead of DynamoDB's tables.
	EnvDatabaseURL = "DATABASE_URL"
)

// concurrency is how many requests the server expects at once, for the
// SDK's connections to DynamoDB.
const concurrency = 64

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", ":"+cmp.Or(os.Getenv(EnvPort), "8080"))
	if err == nil {
		err = run(ctx, ln, slog.Default())
	}
	if err != nil {
		slog.Error("httpserver: stopped", slog.Any("error", err))
		os.Exit(1)
	}
}

// run serves the API on ln until ctx ends, then shuts down gracefully.
// Everything that can fail is checked before it serves.
func run(ctx context.Context, ln net.Listener, logger *slog.Logger) error {
	newHandler := newDynamoDBHandler
	if os.Getenv(EnvDatabaseURL) != "" {
		newHandler = newPostgresHandler
	}
	handler, closeStore, err := newHandler(ctx, logger)
	if err != nil {
		ln.Close()
		return err
	}
	defer closeStore()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.LogAttrs(ctx, slog.LevelInfo, "httpserver: listening", slog.String("addr", ln.Addr().String()))
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.LogAttrs(shutdown, slog.LevelInfo, "httpserver: stopped; the requests in flight have finished")
	return nil
}

func newDynamoDBHandler(ctx context.Context, logger *slog.Logger) (http.Handler, func(), error) {
	idemTable, payTable := os.Getenv(payment.EnvIdempotencyTable), os.Getenv(payment.EnvPaymentsTable)
	if idemTable == "" || payTable == "" {
		return nil, nil, fmt.Errorf("%s and %s must name the DynamoDB tables, or %s the PostgreSQL database",
			payment.EnvIdempotencyTable, payment.EnvPaymentsTable, EnvDatabaseURL)
	}
	// The configuration honours AWS_ENDPOINT_URL_DYNAMODB, so the same
	// binary runs against DynamoDB Local or dynalite, and suits many
	// concurrent requests on one client.
	cfg, err := sdkconfig.Load(ctx, concurrency)
	if err != nil {
		return nil, nil, err
	}
	client := dynamodb.NewFromConfig(cfg)
	if os.Getenv(EnvCreateTables) == "1" {
		if err := ddbstore.CreateTable(ctx, client, idemTable); err != nil {
			return nil, nil, err
		}
		if err := payment.CreateLedgerTable(ctx, client, payTable); err != nil {
			return nil, nil, err
		}
	}
	store, err := ddbstore.New(client, idemTable)
	if err != nil {
		return nil, nil, err
	}
	h, err := paymentserver.New(paymentserver.Config{
		// Completed records are kept in memory too: a retry that reaches
		// the same instance costs no request.
		Store:  memory.NewCache(store, 1024),
		Ledger: &payment.DynamoDBLedger{Client: client, Table: payTable},
		Logger: logger,
	})
	return h, func() {}, err
}

// newPostgresHandler serves the payments from the PostgreSQL database of
// DATABASE_URL, the records and the ledger in it (package pgpayments).
func newPostgresHandler(ctx context.Context, logger *slog.Logger) (http.Handler, func(), error) {
	url := os.Getenv(EnvDatabaseURL)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", EnvDatabaseURL, err)
	}
	// Each request in flight holds a connection for its transaction, and
	// needs another for its reservation and the lease's renewals: 20
	// connections serve 10 requests at once, well within PostgreSQL's
	// default of 100. The URL's pool_max_conns sets another number.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = 20
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("%s: %w", EnvDatabaseURL, err)
	}
	if os.Getenv(EnvCreateTables) == "1" {
		if err := pgpayments.CreateTables(ctx, pool); err != nil {
			pool.Close()
			return nil, nil, err
		}
	}
	store, err := postgres.New(pool, pgpayments.RecordsTable)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	h, err := pgpayments.New(pgpayments.Config{Store: store, Logger: logger})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return h, pool.Close, nil
}
