package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	pgstore "github.com/retrysafe/retrysafe/persistence/postgres"
)

// defaultPgTable is the table of --pg-table when it is not given: the
// name the store's documentation and schema.sql use.
const defaultPgTable = "idempotency"

// openPostgres connects to the URL of the flags, one connection, and
// checks that the table exists and can be read. --request-timeout bounds
// the connection and each statement (statement_timeout, on the server).
func openPostgres(ctx context.Context, f *storeFlags) (*store, error) {
	for i, a := range attrNames {
		if f.attrs[i] != "" {
			return nil, usageError("--%s is for DynamoDB and Redis; a PostgreSQL table's columns have fixed names", a.flag)
		}
	}
	cfg, err := pgx.ParseConfig(f.postgresURL)
	if err != nil {
		// pgx's message shows the URL without its password.
		return nil, usageError("--postgres: %v", err)
	}
	cfg.ConnectTimeout = f.requestTimeout
	cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(f.requestTimeout.Milliseconds(), 10)
	cfg.RuntimeParams["application_name"] = "retrysafe"
	table := f.pgTable
	if table == "" {
		table = defaultPgTable
	}
	name := fmt.Sprintf("PostgreSQL table %s in database %q at %s", pgx.Identifier{table}.Sanitize(), cfg.Database, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	if f.pgSchema != "" {
		name = fmt.Sprintf("PostgreSQL table %s in database %q at %s", pgx.Identifier{f.pgSchema, table}.Sanitize(), cfg.Database, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	}
	optFn := func(o *pgstore.Options) { o.Schema = f.pgSchema }
	explain := func(err error) error { return explainPostgres(name, f.requestTimeout, err) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		if t := timedOut(ctx, name, err, f.requestTimeout, f.timeout); t != nil {
			return nil, t
		}
		return nil, explain(err)
	}
	s, err := pgstore.New(conn, table, optFn)
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, usageError("--pg-table, --pg-schema: %v", strings.TrimPrefix(err.Error(), "persistence/postgres: "))
	}
	if err := checkTable(ctx, conn, table, f.pgSchema); err != nil {
		_ = conn.Close(context.Background())
		if t := timedOut(ctx, name, err, f.requestTimeout, f.timeout); t != nil {
			return nil, t
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return nil, fmt.Errorf("%s does not exist: check --pg-table and --pg-schema, and the database of --postgres", name)
		}
		return nil, explain(err)
	}
	return &store{
		name:           name,
		requestTimeout: f.requestTimeout,
		timeout:        f.timeout,
		records:        s,
		sweeper:        s,
		explain:        explain,
		close:          func() error { return conn.Close(context.Background()) },
	}, nil
}

// checkTable reads nothing from the table, which fails if it does not
// exist or the role may not read it.
func checkTable(ctx context.Context, conn *pgx.Conn, table, schema string) error {
	id := pgx.Identifier{table}
	if schema != "" {
		id = pgx.Identifier{schema, table}
	}
	_, err := conn.Exec(ctx, "SELECT FROM "+id.Sanitize()+" LIMIT 0")
	return err
}

// explainPostgres adds the table to an error, and what it means: a
// statement that ran out of --request-timeout, a privilege the role
// lacks.
func explainPostgres(name string, requestTimeout time.Duration, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57014": // query_canceled: statement_timeout
			return fail(exitStore, "%s: a statement did not finish within %s, the --request-timeout", name, duration(requestTimeout))
		case "42501": // insufficient_privilege
			return fmt.Errorf("%s: %w; the role needs SELECT on the table to read it, and DELETE and UPDATE to release and sweep "+
				"(see the privileges in the documentation of package persistence/postgres)", name, err)
		}
	}
	return fmt.Errorf("%s: %w", name, err)
}
