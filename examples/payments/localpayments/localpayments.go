// Package localpayments runs the payments example (examples/payments)
// locally, on real parts: its bootstrap binary under the Lambda Runtime
// Interface Emulator (package rie), as one or more execution environments,
// against DynamoDB tables in dynalite or DynamoDB Local (a Server). It is
// shared by the example's end-to-end tests and `make demo`.
//
// Post sends a request as API Gateway HTTP APIs do: it builds the
// payload-format-2.0 event of an HTTP request, invokes an instance with
// it, and reads the response event back.
package localpayments

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/examples/payments/payment"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/rie"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/persistence"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// Package is the import path of the payments example's main package.
const Package = "github.com/retrysafe/retrysafe/examples/payments"

// Build builds the payments example for the host into dir and returns the
// bootstrap's path.
func Build(ctx context.Context, dir string) (string, error) {
	return rie.BuildFunction(ctx, Package, dir)
}

// Options configures a Stack.
type Options struct {
	// Bootstrap is the example's binary (see Build). Required.
	Bootstrap string
	// Instances is the number of execution environments. Default 1.
	Instances int
	// MaxConcurrency above 1 runs each instance in the emulator's
	// multi-concurrency mode (see package rie).
	MaxConcurrency int
	// Timeout is the function's timeout. Default rie.DefaultTimeout.
	Timeout time.Duration
	// DemoDelay sets PAYMENTS_DEMO_DELAY=1, so that the function honours
	// payment.HeaderDemoDelay and payment.HeaderDemoDelayAfterLedger.
	DemoDelay bool
	// Transactions stages the ledger entries, which commit with the
	// completion of their keys (see payment.Config.Transactions); the
	// server must have TransactWriteItems (DynamoDB Local). Without it,
	// PAYMENTS_TRANSACTIONS=0: the function writes them directly.
	Transactions bool
	// Steps sets PAYMENTS_STEPS=1: the function charges in steps (see
	// payment.Config.Steps). It needs Transactions off.
	Steps bool
	// Output receives the emulators' output, when set.
	Output io.Writer
}

// Stack is the example running locally: its tables and its instances.
type Stack struct {
	// Client is a DynamoDB client of the server.
	Client *dynamodb.Client
	// IdempotencyTable and PaymentsTable are the names of the tables, new
	// for each Stack.
	IdempotencyTable, PaymentsTable string
	// Instances are the execution environments.
	Instances []*rie.Instance
}

// Server is a DynamoDB-compatible server: a *dynalite.Server, a
// *dynamodblocal.Server or a *dynamotest.Server.
type Server interface {
	// NewClient returns a client of the server.
	NewClient(optFns ...func(*dynamodb.Options)) *dynamodb.Client
	// Env returns the environment variables that point the function's SDK
	// at the server.
	Env() []string
}

// Start creates the tables in srv and starts the instances. The caller
// must Stop the stack; it does not stop srv. The error matches
// rie.ErrUnavailable when the emulator cannot run here.
func Start(ctx context.Context, srv Server, opts Options) (*Stack, error) {
	suffix := strings.ToLower(rand.Text()[:8])
	s := &Stack{
		Client:           srv.NewClient(),
		IdempotencyTable: "idempotency-" + suffix,
		PaymentsTable:    "payments-" + suffix,
	}
	if err := ddbstore.CreateTable(ctx, s.Client, s.IdempotencyTable); err != nil {
		return nil, err
	}
	if err := payment.CreateLedgerTable(ctx, s.Client, s.PaymentsTable); err != nil {
		return nil, err
	}
	env := append(srv.Env(),
		payment.EnvIdempotencyTable+"="+s.IdempotencyTable,
		payment.EnvPaymentsTable+"="+s.PaymentsTable,
	)
	if opts.DemoDelay {
		env = append(env, payment.EnvDemoDelay+"=1")
	}
	if opts.Steps {
		env = append(env, payment.EnvSteps+"=1")
	}
	if opts.Transactions {
		env = append(env, payment.EnvTransactions+"=1")
	} else {
		env = append(env, payment.EnvTransactions+"=0")
	}
	for i := range max(1, opts.Instances) {
		in, err := rie.StartContext(ctx, rie.Config{
			Bootstrap:      opts.Bootstrap,
			Env:            env,
			Timeout:        opts.Timeout,
			FunctionName:   "payments",
			MaxConcurrency: opts.MaxConcurrency,
			Output:         opts.Output,
		})
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("starting instance %d: %w", i, err)
		}
		s.Instances = append(s.Instances, in)
	}
	return s, nil
}

// Stop stops every instance.
func (s *Stack) Stop() error {
	var errs []error
	for _, in := range s.Instances {
		errs = append(errs, in.Stop())
	}
	return errors.Join(errs...)
}

// Request is an HTTP request to POST /payments.
type Request struct {
	// Key is the Idempotency-Key header, none when empty.
	Key string
	// Body is the request body.
	Body string
	// Headers are more request headers.
	Headers map[string]string
	// Tenant is the tenant ID of the invocation (Lambda's tenant isolation
	// mode), none when empty.
	Tenant string
}

// Response is the answer to a Request.
type Response struct {
	// Status is the HTTP status: the function's, or 504 when the
	// invocation timed out and 502 when it failed otherwise, as API
	// Gateway answers.
	Status int
	// Headers are the response headers.
	Headers map[string]string
	// Body is the response body.
	Body string
	// Err is the invocation's error when it did not return a response
	// (rie.FunctionError: a timeout, a crash).
	Err error
	// Instance is the index of the instance that answered.
	Instance int
}

// Replayed reports whether the response is a replay of a stored one.
func (r Response) Replayed() bool { return r.Headers[httpapi.HeaderReplayed] == "true" }

// Payment returns the payment of a 201 response.
func (r Response) Payment() (payment.Payment, bool) {
	var p payment.Payment
	if r.Status != http.StatusCreated || json.Unmarshal([]byte(r.Body), &p) != nil || p.PaymentID == "" {
		return payment.Payment{}, false
	}
	return p, true
}

// Problem returns the problem details of a problem+json response.
func (r Response) Problem() (httpapi.Problem, bool) {
	var p httpapi.Problem
	if r.Headers["Content-Type"] != httpapi.ContentTypeProblem || json.Unmarshal([]byte(r.Body), &p) != nil {
		return httpapi.Problem{}, false
	}
	return p, true
}

// Post sends req to instance i and returns the answer. It fails only when
// the instance cannot be invoked.
func (s *Stack) Post(ctx context.Context, i int, req Request) (Response, error) {
	payload, err := json.Marshal(Event(req))
	if err != nil {
		return Response{}, err
	}
	out, err := s.Instances[i].InvokeTenant(ctx, req.Tenant, payload)
	if err != nil {
		return Response{}, err
	}
	if err := out.Err(); err != nil {
		status := http.StatusBadGateway
		var fe *rie.FunctionError
		if errors.As(err, &fe) && fe.Type == rie.TimeoutType {
			status = http.StatusGatewayTimeout
		}
		return Response{Status: status, Err: err, Instance: i}, nil
	}
	var ev events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out.Payload, &ev); err != nil {
		return Response{}, fmt.Errorf("localpayments: the function's response is not an HTTP API response: %w: %s", err, out.Payload)
	}
	return Response{Status: ev.StatusCode, Headers: ev.Headers, Body: ev.Body, Instance: i}, nil
}

// Event returns the HTTP API event (payload format 2.0) of req, as API
// Gateway sends it to the function of the route POST /payments: header
// names in lower case.
func Event(req Request) events.APIGatewayV2HTTPRequest {
	now := time.Now()
	headers := map[string]string{
		"content-type": "application/json",
		"user-agent":   "localpayments",
	}
	if req.Key != "" {
		headers["idempotency-key"] = req.Key
	}
	for k, v := range req.Headers {
		headers[strings.ToLower(k)] = v
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "POST /payments",
		RawPath:  "/payments",
		Headers:  headers,
		Body:     req.Body,
	}
	ev.RequestContext = events.APIGatewayV2HTTPRequestContext{
		AccountID:  "123456789012",
		APIID:      "local",
		DomainName: "local.execute-api.us-east-1.amazonaws.com",
		RequestID:  strings.ToLower(rand.Text()),
		RouteKey:   "POST /payments",
		Stage:      "$default",
		Time:       now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
		TimeEpoch:  now.UnixMilli(),
		HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
			Method:    http.MethodPost,
			Path:      "/payments",
			Protocol:  "HTTP/1.1",
			SourceIP:  "127.0.0.1",
			UserAgent: "localpayments",
		},
	}
	return ev
}

// Ledger returns the ledger's items.
func (s *Stack) Ledger(ctx context.Context) ([]payment.Charge, error) {
	return payment.ScanLedger(ctx, s.Client, s.PaymentsTable)
}

// WaitInProgress waits until the idempotency table holds an in-progress
// record, that is, until an invocation has reserved its key.
func (s *Stack) WaitInProgress(ctx context.Context) error {
	for {
		// "status" is the store's default StatusAttr.
		out, err := s.Client.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 &s.IdempotencyTable,
			ConsistentRead:            aws.Bool(true),
			FilterExpression:          aws.String("#s = :p"),
			ExpressionAttributeNames:  map[string]string{"#s": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: string(persistence.StatusInProgress)}},
		})
		if err != nil {
			return err
		}
		if len(out.Items) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SkipOrFail skips tb when err says that dynalite or the emulator is not
// available here, unless IDEMPOTENCY_REQUIRE_INTEGRATION=1, and fails it
// otherwise.
func SkipOrFail(tb testenv.TB, err error) {
	tb.Helper()
	if errors.Is(err, dynalite.ErrUnavailable) || errors.Is(err, rie.ErrUnavailable) {
		testenv.SkipUnlessRequired(tb, err)
	}
	tb.Fatal(err)
}

// PackageInit adds up the initialisation of the packages whose import
// paths start with prefix, from the lines that a Go program started with
// GODEBUG=inittrace=1 prints (the runtime's "init <package> @<start> ms,
// <clock> ms clock, <bytes> bytes, <allocs> allocs" lines) among lines.
func PackageInit(lines []string, prefix string) time.Duration {
	var total time.Duration
	for _, line := range lines {
		_, rest, ok := strings.Cut(line, "init "+prefix)
		if !ok {
			continue
		}
		_, rest, ok = strings.Cut(rest, " ms, ")
		if !ok {
			continue
		}
		clock, _, ok := strings.Cut(rest, " ms clock")
		if !ok {
			continue
		}
		if ms, err := strconv.ParseFloat(clock, 64); err == nil {
			total += time.Duration(ms * float64(time.Millisecond))
		}
	}
	return total
}
