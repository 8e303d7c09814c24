package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

type Payment struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

type Charge struct {
	ChargeID string `json:"charge_id"`
}

func Example() {
	charges := 0
	charge := func(ctx context.Context, p Payment) (Charge, error) {
		charges++ // the side effect: charge the card
		return Charge{ChargeID: fmt.Sprintf("ch_%d", charges)}, nil
	}

	// On Lambda: lambda.Start(idempotency.Must(idempotency.Wrap(charge, store, ...))),
	// with a DynamoDB store.
	store := memory.New()
	handler := idempotency.Must(idempotency.Wrap(charge, store,
		idempotency.WithKey("order_id"),
		idempotency.WithPayloadValidation("amount"),
		idempotency.WithExpiry(24*time.Hour)))

	ctx := context.Background()
	first, _ := handler(ctx, Payment{OrderID: "o-1", Amount: 100})
	retry, _ := handler(ctx, Payment{OrderID: "o-1", Amount: 100})
	_, err := handler(ctx, Payment{OrderID: "o-1", Amount: 999})

	fmt.Println(first.ChargeID, retry.ChargeID, charges)
	fmt.Println(errors.Is(err, idempotency.ErrPayloadMismatch))
	// Output:
	// ch_1 ch_1 1
	// true
}

// A function inside a handler can be idempotent on its own, with its own
// key: Powertools' idempotent_function.
func ExampleWrap_function() {
	store := memory.New()
	sent := 0
	sendConfirmation, err := idempotency.Wrap(func(ctx context.Context, order Payment) (string, error) {
		sent++
		return "email sent for " + order.OrderID, nil
	}, store, idempotency.WithKeyPrefix("send-confirmation"), idempotency.WithKey("order_id"))
	if err != nil {
		panic(err)
	}

	for range 3 {
		msg, _ := sendConfirmation(context.Background(), Payment{OrderID: "o-7"})
		fmt.Println(msg)
	}
	fmt.Println("emails sent:", sent)
	// Output:
	// email sent for o-7
	// email sent for o-7
	// email sent for o-7
	// emails sent: 1
}

// Errors that a retry cannot fix are recorded and replayed, instead of
// releasing the key.
func ExamplePermanent() {
	attempts := 0
	pay := idempotency.Must(idempotency.Wrap(func(ctx context.Context, p Payment) (Charge, error) {
		attempts++
		return Charge{}, idempotency.Permanent(errors.New("card declined"))
	}, memory.New()))

	for range 2 {
		_, err := pay(context.Background(), Payment{OrderID: "o-2", Amount: 5})
		fmt.Println(err)
	}
	fmt.Println("attempts:", attempts)
	// Output:
	// card declined
	// card declined
	// attempts: 1
}

func ExampleWithResponseHook() {
	pay := idempotency.Must(idempotency.Wrap(func(ctx context.Context, p Payment) (Charge, error) {
		return Charge{ChargeID: "ch_1"}, nil
	}, memory.New(), idempotency.WithResponseHook(func(ctx context.Context, c Charge, rec *persistence.Record) Charge {
		c.ChargeID += " (replayed)"
		return c
	})))
	first, _ := pay(context.Background(), Payment{OrderID: "o-3"})
	again, _ := pay(context.Background(), Payment{OrderID: "o-3"})
	fmt.Println(first.ChargeID)
	fmt.Println(again.ChargeID)
	// Output:
	// ch_1
	// ch_1 (replayed)
}

func ExampleKeyFromContext() {
	pay := idempotency.Must(idempotency.Wrap(func(ctx context.Context, p Payment) (string, error) {
		// Forward the key to a payment provider as its own idempotency key.
		key, _ := idempotency.KeyFromContext(ctx)
		return key[:len("payments#")+8], nil
	}, memory.New(), idempotency.WithKeyPrefix("payments"), idempotency.WithKey("order_id")))
	key, _ := pay(context.Background(), Payment{OrderID: "o-4"})
	fmt.Println(key)
	// Output:
	// payments#c562d703
}

func ExampleGuard_Do() {
	g, err := idempotency.NewGuard(memory.New(), idempotency.WithKeyPrefix("jobs"))
	if err != nil {
		panic(err)
	}
	for range 2 {
		res, err := g.Do(context.Background(), "job-42", "", func(ctx context.Context) ([]byte, error) {
			return []byte(`{"status":"done"}`), nil
		})
		fmt.Println(string(res.Response), res.Outcome, err)
	}
	// Output:
	// {"status":"done"} new <nil>
	// {"status":"done"} replay <nil>
}

// In Lambda's tenant isolation mode, each tenant has its own record of a
// key: two tenants that send the same order are charged once each.
func ExampleWithoutTenantIsolation() {
	charges := 0
	charge := func(ctx context.Context, p Payment) (Charge, error) {
		charges++
		return Charge{ChargeID: fmt.Sprintf("ch_%d", charges)}, nil
	}
	// The runtime puts the tenant ID of each invocation in its context.
	blue := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{TenantID: "blue"})
	green := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{TenantID: "green"})
	p := Payment{OrderID: "o-1", Amount: 100}

	apart := idempotency.Must(idempotency.Wrap(charge, memory.New(), idempotency.WithKey("order_id")))
	b, _ := apart(blue, p)
	g, _ := apart(green, p)
	again, _ := apart(blue, p)
	fmt.Println("tenants apart:", b.ChargeID, g.ChargeID, again.ChargeID)

	shared := idempotency.Must(idempotency.Wrap(charge, memory.New(), idempotency.WithKey("order_id"),
		idempotency.WithoutTenantIsolation()))
	b, _ = shared(blue, p)
	g, _ = shared(green, p)
	fmt.Println("one record for all:", b.ChargeID, g.ChargeID)
	// Output:
	// tenants apart: ch_1 ch_2 ch_1
	// one record for all: ch_3 ch_3
}

// A function with two side effects runs each as a step. When the email
// fails, the call fails and its key is released. The retry finds the
// charge's stored result and sends only the email.
func ExampleStep() {
	charges, emails := 0, 0
	mailDown := true
	pay := func(ctx context.Context, p Payment) (Charge, error) {
		c, err := idempotency.Step(ctx, "charge", func(ctx context.Context) (Charge, error) {
			charges++
			return Charge{ChargeID: fmt.Sprintf("ch_%d", charges)}, nil
		})
		if err != nil {
			return Charge{}, err
		}
		_, err = idempotency.Step(ctx, "email", func(ctx context.Context) (bool, error) {
			if mailDown {
				return false, errors.New("mail server down")
			}
			emails++
			return true, nil
		})
		return c, err
	}
	handler := idempotency.Must(idempotency.Wrap(pay, memory.New(), idempotency.WithKey("order_id")))
	ctx := context.Background()
	p := Payment{OrderID: "1001", Amount: 4200}

	_, err := handler(ctx, p)
	fmt.Println("first attempt:", err)
	mailDown = false
	c, err := handler(ctx, p)
	fmt.Println("retry:", c.ChargeID, err)
	fmt.Println("charges:", charges, "emails:", emails)
	// Output:
	// first attempt: mail server down
	// retry: ch_1 <nil>
	// charges: 1 emails: 1
}
