package postgres_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/postgres"
)

// order is the examples' input, and receipt their output.
type (
	order struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	receipt struct {
		ChargeID string `json:"charge_id"`
	}
)

// A handler made idempotent with records in PostgreSQL. It needs a server
// at DATABASE_URL.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// Or take postgres.Schema into a migration.
	if err := postgres.CreateTable(ctx, pool, "idempotency"); err != nil {
		log.Fatal(err)
	}
	store, err := postgres.New(pool, "idempotency")
	if err != nil {
		log.Fatal(err)
	}
	charge := func(ctx context.Context, o order) (receipt, error) {
		return receipt{ChargeID: "ch_1"}, nil
	}
	pay, err := idempotency.Wrap(charge, store, idempotency.WithKey("id"))
	if err != nil {
		log.Fatal(err)
	}
	_, _ = pay(ctx, order{ID: "ord_1", Amount: 4200})
}

// A handler whose payment row commits with the completion of its key,
// in the transaction of postgres.Tx: both, or neither, and once.
func ExampleTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := postgres.New(pool, "idempotency")
	if err != nil {
		log.Fatal(err)
	}
	charge := func(ctx context.Context, o order) (receipt, error) {
		tx, ok := postgres.Tx(ctx)
		if !ok {
			return receipt{}, errors.New("not wrapped with idempotency.WithTransactions")
		}
		// An error here aborts the transaction: return it, and nothing
		// of the call is written.
		if _, err := tx.Exec(ctx, `INSERT INTO ledger (order_id, amount) VALUES ($1, $2)`, o.ID, o.Amount); err != nil {
			return receipt{}, err
		}
		return receipt{ChargeID: "ch_" + o.ID}, nil
	}
	pay, err := idempotency.Wrap(charge, store, idempotency.WithKey("id"), idempotency.WithTransactions())
	if err != nil {
		log.Fatal(err)
	}
	_, err = pay(ctx, order{ID: "ord_1", Amount: 4200})
	var commitErr *idempotency.CommitError
	switch {
	case errors.As(err, &commitErr) && !commitErr.Unknown:
		// Nothing was written (a serialization failure at COMMIT, say),
		// and the key is free: retry the call.
	case errors.As(err, &commitErr):
		// The commit may have happened: a retry after the reservation's
		// in-progress expiry finds out, and writes the row at most once.
	case err != nil:
		// The handler's error: nothing was written.
	}
}

// A handler's own write and the completion of its key, in one
// transaction: both commit, or neither.
func ExampleStore_CompleteTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := postgres.New(pool, "idempotency")
	if err != nil {
		log.Fatal(err)
	}
	// rec is the caller's reservation, completed with the handler's result.
	var rec *persistence.Record

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // after Commit, does nothing
	if _, err := tx.Exec(ctx, `INSERT INTO ledger (charge, amount) VALUES ($1, $2)`, "ch_1", 4200); err != nil {
		log.Fatal(err)
	}
	switch err := store.CompleteTx(ctx, tx, rec); {
	case err == nil:
		if err := tx.Commit(ctx); err != nil { // the charge and the completion
			log.Print(err) // committed or not: a lost reply does not say
		}
	case errors.Is(err, postgres.ErrAlreadyCompleted):
		// An earlier attempt committed both: roll this one back.
	case errors.Is(err, persistence.ErrFenced):
		// Another call holds the key now: roll back the charge.
	}
}

// The expiry sweep, as a scheduled job: PostgreSQL has no TTL.
func ExampleStore_Sweep() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := postgres.New(pool, "idempotency")
	if err != nil {
		log.Fatal(err)
	}
	for range time.Tick(time.Minute) {
		for {
			n, err := store.Sweep(ctx, time.Now(), 1000)
			if err != nil {
				log.Print(err)
			}
			if err != nil || n < 1000 {
				break
			}
		}
	}
}
