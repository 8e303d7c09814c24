package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
)

// Request is the input of the handler under test: a payment-like request
// that a client sends, unchanged, with every retry of its key.
type Request struct {
	// Key is the idempotency key material the client chose.
	Key string `json:"key"`
	// Payload is the rest of the request; it is the same for every retry.
	Payload string `json:"payload"`
	// Large asks for a response too large for the store (ResponseTooLargeError
	// on replay).
	Large bool `json:"large,omitempty"`
	// Decline makes the handler fail permanently (a declined card), which is
	// recorded and replayed.
	Decline bool `json:"decline,omitempty"`
}

// Response is what the handler returns after its side effect.
type Response struct {
	// Key echoes Request.Key, so that an answer given for the wrong key shows.
	Key string `json:"key"`
	// Charge names the invocation that performed the side effect.
	Charge string `json:"charge"`
	// Blob is the receipt: short, or for Large requests, incompressible and
	// larger than the stores are configured to keep.
	Blob string `json:"blob"`
}

// Answer is the normalised form of a successful response, as clients
// compare answers.
func (r *Response) Answer() string {
	sum := sha256.Sum256([]byte(r.Blob))
	return "ok " + r.Key + " " + r.Charge + " " + hex.EncodeToString(sum[:8])
}

// Normalised answers that are not a Response.
const (
	// AnswerTooLarge is the answer of a replay whose response was too large to
	// store (*idempotency.ResponseTooLargeError).
	AnswerTooLarge = "too_large"
)

// errorAnswer is the normalised answer of a final error: its type name (as
// Lambda reports it, and as the library records it) and its message.
func errorAnswer(typ, msg string) string { return "err " + typ + " " + msg }

// largeBlobSize is the size of a Large response's blob: incompressible, and
// larger than the stores' configured limit (ResponseLimit) even gzipped.
const largeBlobSize = 12 << 10

// ResponseLimit is the largest response a Backend's store must keep (its
// MaxResponseSize, MaxItemSize): Large responses are larger, and are
// completed without their response.
const ResponseLimit = 4 << 10

// receipt returns the blob of the response that invocation charge gives to
// req: derived from both, so that a replay of another invocation's receipt,
// or a corrupted one, does not match.
func receipt(req Request, charge string) string {
	if !req.Large {
		return "receipt for " + req.Key + " by " + charge
	}
	seed := sha256.Sum256([]byte(req.Key + "/" + charge))
	var key [32]byte
	copy(key[:], seed[:])
	raw := make([]byte, largeBlobSize*3/4)
	rand.NewChaCha8(key).Read(raw)
	return base64.StdEncoding.EncodeToString(raw)
}

// DeclinedError is the permanent error of a declined request: the handler
// decided, and the decision is recorded and replayed.
type DeclinedError struct{ Invocation string }

// Error implements error.
func (e *DeclinedError) Error() string {
	return "chaos: declined by invocation " + e.Invocation
}

// AfterEffectError is a failure after the side effect, which the handler
// marks permanent so that a retry does not repeat the side effect.
type AfterEffectError struct{ Invocation string }

// Error implements error.
func (e *AfterEffectError) Error() string {
	return "chaos: failed after the side effect of invocation " + e.Invocation
}

// TransientError is a failure before the side effect, which releases the
// key so that a retry runs the handler again. In transactional mode, a
// write of the side effect that failed is one too: nothing of the
// transaction commits (see TransactionalBackend).
type TransientError struct {
	Invocation string
	// Err is the failed write's error, if any.
	Err error
}

// Error implements error.
func (e *TransientError) Error() string {
	msg := "chaos: transient failure of invocation " + e.Invocation
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *TransientError) Unwrap() error { return e.Err }

// errKilled is what a killed invocation's handler returns. Nothing it causes
// reaches the store or the client: the store is cut off from the
// invocation, and the harness reports the invocation as killed.
var errKilled = errors.New("chaos: the invocation was killed")

// injectedPanic is the value of the panics the handler injects.
type injectedPanic struct{ invocation string }

// handle is the handler under test. It acts out its invocation's plan
// around one side effect, which it appends to the log of side effects: the
// only record the checker trusts for what happened.
func (h *Harness) handle(ctx context.Context, req Request) (Response, error) {
	inv := invocationFrom(ctx)
	if inv == nil {
		h.strayCall("handler", req.Key)
		return Response{}, errors.New("chaos: handler called without an invocation in its context")
	}
	inv.handlerStarted(ctx)
	p := inv.plan

	if err := sleepCtx(ctx, p.work); err != nil {
		return Response{}, err
	}
	if p.before != faultNone {
		h.count(p.before)
	}
	switch p.before {
	case faultHandlerError:
		return Response{}, &TransientError{Invocation: inv.id}
	case faultPanic:
		panic(injectedPanic{inv.id})
	case faultKillBefore:
		inv.kill(false)
		return Response{}, errKilled
	case faultLateEffect:
		// A handler that does not watch its context: it stalls past its
		// deadline and performs the side effect late.
		time.Sleep(time.Until(inv.deadline) + p.overrun)
	default:
		if err := ctx.Err(); err != nil {
			// A well-behaved handler passes ctx to its side effect, which
			// then does not start after the deadline.
			return Response{}, err
		}
	}

	resp := Response{Key: req.Key, Charge: inv.id, Blob: receipt(req, inv.id)}
	var final error
	switch {
	case req.Decline:
		final = &DeclinedError{Invocation: inv.id}
	case p.after == faultFailAfter:
		final = &AfterEffectError{Invocation: inv.id}
	}
	answer := resp.Answer()
	if final != nil {
		answer = errorAnswer(typeName(final), final.Error())
	}
	if tx := transactional(h.backend); tx != nil && final == nil {
		// The side effect is a write staged in the completion, or made in
		// the store's transaction: it happens if and when the completion
		// commits, and the checker reads what committed from the store.
		stageCtx := ctx
		if p.before == faultLateEffect {
			// A handler that does not watch its context makes its write
			// past the deadline.
			var cancel context.CancelFunc
			stageCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), h.cfg.Timeout)
			defer cancel()
		}
		if err := tx.StageEffect(stageCtx, req.Key, inv.id, answer); err != nil {
			var failed *TransientError
			if errors.As(err, &failed) {
				h.count(countEffectFailed)
				return Response{}, err
			}
			return Response{}, fmt.Errorf("chaos: staging the side effect: %w", err)
		}
		inv.stagedEffect(answer)
	} else {
		inv.sideEffect(answer)
	}

	if p.after != faultNone {
		h.count(p.after)
	}
	switch p.after {
	case faultKillAfter:
		inv.kill(true)
		return Response{}, errKilled
	case faultOverrun:
		// Slow work after the side effect, past the deadline: the client
		// gives up, the invocation goes on and later tries to complete.
		time.Sleep(time.Until(inv.deadline) + p.overrun)
	}
	if final != nil {
		return Response{}, idempotency.Permanent(final)
	}
	return resp, nil
}

// sleepCtx sleeps for d or until ctx is done, and returns ctx's error in the
// latter case.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// typeName names err's dynamic type without the pointer, as Lambda reports
// an errorType and as the library records a permanent error's type.
func typeName(err error) string {
	switch err.(type) {
	case *DeclinedError:
		return "DeclinedError"
	case *AfterEffectError:
		return "AfterEffectError"
	case *TransientError:
		return "TransientError"
	}
	return fmt.Sprintf("%T", err)
}
