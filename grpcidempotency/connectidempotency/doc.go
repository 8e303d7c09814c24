// Package connectidempotency gives Connect services idempotency keys.
package connectidempotency
