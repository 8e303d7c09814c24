// Command retrysafe is the operator's tool of the idempotency library
// github.com/retrysafe/retrysafe: it finds the record of a request, lists
// and counts records, releases a key safely, and sweeps expired records
// out of a PostgreSQL table or a DynamoDB table without time to live.
//
// Install it with
//
//	go install github.com/retrysafe/retrysafe/cmd/retrysafe@latest
//
// Usage:
//
//	retrysafe key [flags] [EVENT.json]   the key the library derives for an event
//	retrysafe get [flags] KEY            a record: status, expiry, owner, response
//	retrysafe ls [flags]                 records, with filters
//	retrysafe stats [flags]              counts of records by state
//	retrysafe release [flags] KEY        delete a record, if it is still the one shown
//	retrysafe sweep [flags]              delete expired records (PostgreSQL, DynamoDB without TTL)
//
// The store is a DynamoDB table (--table, with the SDK's standard
// configuration: profile, region, AWS_ENDPOINT_URL_DYNAMODB), Redis or
// Valkey (--redis URL, --cluster for a cluster), or a PostgreSQL table
// (--postgres URL, --pg-table, --pg-schema). Each request to it has a
// timeout (--request-timeout, 5s; for PostgreSQL, the connection and each
// statement), and the command a deadline (--timeout, 10m). Tables fit the terminal, or 120 columns; -o wide prints them
// whole, -o json for scripts. `retrysafe help COMMAND` lists a command's
// flags.
//
// Exit codes: 0 success; 1 the store failed, did not answer in time, or
// does not hold what the flags describe (a missing table, other attribute
// names); 2 usage: a bad flag, an event that is not JSON, a bad
// expression; 3 no record for the key; 4 refused: nothing was released,
// because the record changed, it is completed and --force was not given,
// or the answer was not yes; 130 interrupted (Ctrl-C).
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	go func() {
		<-interrupts
		// A second Ctrl-C ends the process at once, should a step not
		// heed the first.
		signal.Stop(interrupts)
		cancel(errInterrupted)
	}()
	os.Exit(run(ctx, systemEnv(), os.Args[1:]))
}
