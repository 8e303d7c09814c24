package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/retrysafe/retrysafe/idempotency"
)

// Defaults of the client's retries; package grpcidempotency exports them.
const (
	DefaultMaxAttempts = 5
	DefaultMaxElapsed  = time.Minute
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
)

// RetryPolicy is the client's budget of retries.
type RetryPolicy struct {
	MaxAttempts                                int
	MaxElapsed, KeyWindow, BaseDelay, MaxDelay time.Duration
}

// Resolve fills in the defaults of p and checks it.
func (p RetryPolicy) Resolve() (RetryPolicy, error) {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultMaxAttempts)
	p.KeyWindow = cmp.Or(p.KeyWindow, idempotency.DefaultExpiry)
	p.MaxElapsed = cmp.Or(p.MaxElapsed, min(DefaultMaxElapsed, p.KeyWindow/2))
	p.BaseDelay = cmp.Or(p.BaseDelay, DefaultBaseDelay)
	p.MaxDelay = cmp.Or(p.MaxDelay, DefaultMaxDelay)
	switch {
	case p.MaxAttempts < 1:
		return p, fmt.Errorf("MaxAttempts %d is not positive", p.MaxAttempts)
	case p.KeyWindow <= 0 || p.MaxElapsed <= 0 || p.BaseDelay <= 0 || p.MaxDelay <= 0:
		return p, errors.New("KeyWindow, MaxElapsed, BaseDelay and MaxDelay must be positive")
	case p.MaxElapsed > p.KeyWindow/2:
		return p, fmt.Errorf("MaxElapsed %v is more than half the KeyWindow %v: a late retry could reach the server after it forgot the key, "+
			"and run the call a second time", p.MaxElapsed, p.KeyWindow)
	case p.BaseDelay > p.MaxDelay:
		return p, fmt.Errorf("BaseDelay %v is more than MaxDelay %v", p.BaseDelay, p.MaxDelay)
	}
	return p, nil
}

// Do calls attempt until it succeeds or the policy says to stop, and
// returns its last error; statusOf returns the status of an error of
// attempt's. It returns the context's error, wrapped, when ctx ends
// before the next attempt. attempts, when not nil, receives the
// number of attempts made.
func (p RetryPolicy) Do(ctx context.Context, attempts *int, attempt func() error, statusOf func(error) *spb.Status) error {
	start := time.Now()
	for n := 1; ; n++ {
		if attempts != nil {
			*attempts = n
		}
		err := attempt()
		if err == nil {
			return nil
		}
		wait, again := p.retry(statusOf(err), n)
		if !again || n == p.MaxAttempts || time.Since(start)+wait > p.MaxElapsed {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return err // the call would end before its next attempt
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("waiting to send attempt %d: %w", n+1, ctx.Err())
		case <-timer.C:
		}
	}
}

// retry decides whether an attempt whose status is st calls for another,
// and after how long: UNAVAILABLE, after its RetryInfo or a backoff, and
// ABORTED with a RetryInfo (a call with the key in progress), after it.
func (p RetryPolicy) retry(st *spb.Status, attempt int) (wait time.Duration, again bool) {
	delay, hinted := retryDelayOf(st)
	switch code.Code(st.GetCode()) {
	case code.Code_UNAVAILABLE:
		if hinted {
			return delay, true
		}
		return p.backoff(attempt), true
	case code.Code_ABORTED:
		return delay, hinted
	}
	return 0, false
}

// retryDelayOf returns the delay of the RetryInfo in st's details.
func retryDelayOf(st *spb.Status) (time.Duration, bool) {
	for _, d := range st.GetDetails() {
		var info errdetails.RetryInfo
		if d.MessageIs(&info) && d.UnmarshalTo(&info) == nil && info.GetRetryDelay().IsValid() {
			return max(info.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// backoff returns the wait after attempt: BaseDelay·2^(attempt-1), at most
// MaxDelay, less a random part of up to half of it.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := p.MaxDelay
	if shift := attempt - 1; shift < 62 && p.BaseDelay <= p.MaxDelay>>shift {
		d = p.BaseDelay << shift
	}
	return d - mathrand.N(d/2+1)
}

// CheckClientKey returns why a key that a client chose is not valid, or
// nil. Metadata values must be printable ASCII.
func CheckClientKey(key string, metadata bool) error {
	if reason := checkKey(key); reason != "" {
		return errors.New("the key " + reason)
	}
	if metadata {
		for i := 0; i < len(key); i++ {
			if c := key[i]; c < 0x20 || c > 0x7e {
				return fmt.Errorf("the key must be printable ASCII to go in metadata; it has %q at byte %d", c, i)
			}
		}
	}
	return nil
}
