// Package grpcidempotency gives gRPC services idempotency keys.
package grpcidempotency
