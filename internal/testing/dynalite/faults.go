package dynalite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Faults is an http.RoundTripper for DynamoDB clients that injects faults
// into chosen operations and passes every other request to Base. The zero
// value passes everything to http.DefaultTransport. It is safe for
// concurrent use, and faults may be added and cleared while clients use it.
//
//	faults := &dynalite.Faults{}
//	client := srv.NewClient(faults.Register)
//	faults.LoseReply("PutItem", 1) // the next PutItem reaches the server, its reply does not
type Faults struct {
	// Base sends the requests that get through. Nil means
	// http.DefaultTransport.
	Base http.RoundTripper

	// OnHold, when set, is given each request that ForwardedLate holds
	// back, on the goroutine of RoundTrip, before the client gets its
	// error, with the request's context. It decides when the request
	// reaches the server: it calls Forward then, from any goroutine.
	// Without OnHold, TakeHeld returns the held requests.
	OnHold func(ctx context.Context, h *HeldRequest)

	mu    sync.Mutex
	rules []*rule
	fired map[FaultKind]int
	held  []*HeldRequest
}

// FaultKind is a kind of fault that Faults injects.
type FaultKind int

const (
	// ForwardedLate holds the request back and fails the attempt at once
	// with a timeout, which the SDK retries, as a request stuck in a proxy
	// or a congested network does; the request reaches the server later,
	// when its HeldRequest is forwarded (see Faults.OnHold). So the
	// attempt and the SDK's retry of it both reach the server, the retry
	// first.
	ForwardedLate FaultKind = iota + 1
	// LostReply forwards the request to the server, then discards the reply
	// and fails the attempt as if the connection had dropped: the write
	// happened, but the client does not know it, and the SDK retries it.
	LostReply
	// Throttled answers without forwarding the request, with DynamoDB's
	// ProvisionedThroughputExceededException (HTTP 400), which the SDK
	// retries.
	Throttled
	// Refused fails the attempt without forwarding the request, as a server
	// that is down does ("connection refused"), which the SDK retries.
	Refused
	// Answered answers without forwarding the request, with the HTTP
	// status and DynamoDB error code of the fault (see AnswerError).
	Answered
)

// String implements fmt.Stringer.
func (k FaultKind) String() string {
	switch k {
	case ForwardedLate:
		return "ForwardedLate"
	case LostReply:
		return "LostReply"
	case Throttled:
		return "Throttled"
	case Refused:
		return "Refused"
	case Answered:
		return "Answered"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

type rule struct {
	op        string // "" matches every operation
	kind      FaultKind
	remaining int // < 0: unlimited
	// status and code are the answer of an Answered fault.
	status int
	code   string
}

// Register makes a client send its requests through f. Pass it as an option
// to dynamodb.New, dynamodb.NewFromConfig or Server.NewClient.
func (f *Faults) Register(o *dynamodb.Options) {
	o.HTTPClient = &http.Client{Transport: f}
}

// Add injects fault kind into the next n requests (attempts, not calls) of
// operation op, such as "PutItem"; every operation if op is "". n < 0 means
// every request until Clear.
func (f *Faults) Add(op string, kind FaultKind, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{op: op, kind: kind, remaining: n})
}

// LoseReply is Add(op, LostReply, n).
func (f *Faults) LoseReply(op string, n int) { f.Add(op, LostReply, n) }

// Throttle is Add(op, Throttled, n).
func (f *Faults) Throttle(op string, n int) { f.Add(op, Throttled, n) }

// Refuse is Add(op, Refused, n).
func (f *Faults) Refuse(op string, n int) { f.Add(op, Refused, n) }

// AnswerError answers the next n requests of op (as Add counts them) with
// an error of DynamoDB's, HTTP status and error code (such as 400 and
// "ValidationException"), without forwarding them.
func (f *Faults) AnswerError(op string, status int, code string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{op: op, kind: Answered, remaining: n, status: status, code: code})
}

// Clear removes every fault that has not been injected yet.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Fired returns how many faults of kind have been injected.
func (f *Faults) Fired(kind FaultKind) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired[kind]
}

// next returns the fault to inject into a request of op, if any.
func (f *Faults) next(op string) rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.rules {
		if r.op != "" && r.op != op {
			continue
		}
		if r.remaining > 0 {
			r.remaining--
			if r.remaining == 0 {
				f.rules = append(f.rules[:i:i], f.rules[i+1:]...)
			}
		}
		if f.fired == nil {
			f.fired = make(map[FaultKind]int)
		}
		f.fired[r.kind]++
		return *r
	}
	return rule{}
}

// ErrInjected is wrapped by the errors of the faults that Faults injects at
// the transport level (LostReply, Refused).
var ErrInjected = errors.New("dynalite: injected fault")

// RoundTrip implements http.RoundTripper.
func (f *Faults) RoundTrip(req *http.Request) (*http.Response, error) {
	base := f.Base
	if base == nil {
		base = http.DefaultTransport
	}
	op := Operation(req)
	r := f.next(op)
	switch r.kind {
	case LostReply:
		resp, err := base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: reply to %s lost (status %d): %w", ErrInjected, op, resp.StatusCode, syscall.ECONNRESET)
	case Throttled:
		return errorReply(req, http.StatusBadRequest, "ProvisionedThroughputExceededException",
			"The level of configured provisioned throughput for the table was exceeded. (injected fault)"), nil
	case Answered:
		return errorReply(req, r.status, r.code, "injected fault"), nil
	case Refused:
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("%w: %w", ErrInjected, syscall.ECONNREFUSED)}
	case ForwardedLate:
		h, err := hold(base, op, req)
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		onHold := f.OnHold
		if onHold == nil {
			f.held = append(f.held, h)
		}
		f.mu.Unlock()
		if onHold != nil {
			onHold(req.Context(), h)
		}
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("%w: %s held back, to reach the server later: %w", ErrInjected, op, os.ErrDeadlineExceeded)}
	}
	return base.RoundTrip(req)
}

// TakeHeld returns the requests held back since the last call, in the
// order they were held, when no OnHold took them.
func (f *Faults) TakeHeld() []*HeldRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.held
	f.held = nil
	return held
}

// HeldRequest is a request that ForwardedLate held back: it reaches the
// server when Forward is called.
type HeldRequest struct {
	// Op is the DynamoDB operation, such as "UpdateItem".
	Op string

	base http.RoundTripper
	req  *http.Request // a copy of the attempt, without its context
	body []byte
	once sync.Once
	err  error
}

// hold copies the attempt req (its body read), for Forward.
func hold(base http.RoundTripper, op string, req *http.Request) (*HeldRequest, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	return &HeldRequest{Op: op, base: base, req: req.Clone(context.Background()), body: body}, nil
}

// Forward sends the held request to the server, once, with ctx, and
// returns nil if the server answered 2xx, a *ReplyError for a DynamoDB
// error, or the transport's error; later calls return the first result.
// The request is the attempt as the client sent it, signature included.
func (h *HeldRequest) Forward(ctx context.Context) error {
	h.once.Do(func() { h.err = h.forward(ctx) })
	return h.err
}

func (h *HeldRequest) forward(ctx context.Context) error {
	req := h.req.WithContext(ctx)
	req.Body = io.NopCloser(bytes.NewReader(h.body))
	req.ContentLength = int64(len(h.body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(h.body)), nil }
	resp, err := h.base.RoundTrip(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 == 2 {
		return nil
	}
	e := &ReplyError{Op: h.Op, Status: resp.StatusCode}
	var body struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(reply, &body) == nil {
		e.Message = body.Message
		e.Type = body.Type
		if i := strings.LastIndexByte(body.Type, '#'); i >= 0 {
			e.Type = body.Type[i+1:]
		}
	}
	return e
}

// ReplyError is a DynamoDB error reply to a forwarded HeldRequest.
type ReplyError struct {
	Op     string
	Status int
	// Type is the error's type without its namespace, such as
	// "ConditionalCheckFailedException".
	Type    string
	Message string
}

// Error implements error.
func (e *ReplyError) Error() string {
	return fmt.Sprintf("dynalite: %s forwarded late: HTTP %d %s: %s", e.Op, e.Status, e.Type, e.Message)
}

// Operation returns the DynamoDB operation name of an HTTP request, such as
// "PutItem", from its X-Amz-Target header.
func Operation(req *http.Request) string {
	target := req.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// errorReply is DynamoDB's answer to req with an error: its HTTP status,
// and its error code and message in DynamoDB's JSON.
func errorReply(req *http.Request, status int, code, message string) *http.Response {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	body := fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, message)
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode: status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":     {"application/x-amz-json-1.0"},
			"X-Amzn-Requestid": {"injected-" + code},
		},
		Body:          io.NopCloser(bytes.NewReader([]byte(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
