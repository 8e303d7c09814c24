// Package examples holds the runnable examples of the library, each a
// Lambda function or a server (a main package) with a testable core:
//
//   - examples/payments: an API Gateway HTTP API that charges once per
//     Idempotency-Key (package payment);
//   - examples/httpserver: the same API as a net/http server behind
//     httpapi.Middleware, and a client that retries it through
//     httpclient.Transport (package paymentserver); with DATABASE_URL, its
//     PostgreSQL variant, each ledger row committed with the completion
//     of its key (package pgpayments; make demo-postgres);
//   - examples/function: an idempotent function inside a handler, keyed
//     by a JMESPath expression, with payload validation (package
//     confirmation);
//   - examples/orders: an SQS consumer that processes each order once and
//     reports only the failed messages of a batch (package order);
//   - examples/grpcorders: a gRPC service whose CreateOrder runs once per
//     AIP-155 request_id, and a client that retries it with one key
//     (package orderserver; a module of its own, so that this one does not
//     require gRPC).
//
// template.yaml at the repository root deploys the functions with AWS SAM; the test
// of this package checks that the template agrees with the code: table
// schemas, runtime, handler, environment variables and IAM actions.
package examples
