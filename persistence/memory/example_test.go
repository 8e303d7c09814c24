package memory_test

import (
	"context"
	"fmt"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// A Store protects a function against retries within one process: in tests,
// local runs and single-process services.
func ExampleNew() {
	charges := 0
	charge := func(ctx context.Context, orderID string) (string, error) {
		charges++
		return "receipt for " + orderID, nil
	}
	chargeOnce := idempotency.Must(idempotency.Wrap(charge, memory.New()))

	for range 3 {
		receipt, err := chargeOnce(context.Background(), "ord_1")
		fmt.Println(receipt, err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// receipt for ord_1 <nil>
	// receipt for ord_1 <nil>
	// receipt for ord_1 <nil>
	// charges: 1
}

// A Cache in front of a shared store answers retries that reach the same
// warm execution environment without a request to the store. Here the
// shared store is another memory.Store, standing in for DynamoDB.
func ExampleNewCache() {
	shared := memory.New()
	cached := memory.NewCache(shared, 1000)
	greet := idempotency.Must(idempotency.Wrap(func(ctx context.Context, name string) (string, error) {
		return "hello " + name, nil
	}, cached))

	for range 2 {
		greeting, _ := greet(context.Background(), "ana")
		fmt.Println(greeting)
	}
	fmt.Println("cached records:", cached.Len())
	// Output:
	// hello ana
	// hello ana
	// cached records: 1
}
