package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

// Middleware returns a net/http middleware that gives the handlers it wraps
// the Idempotency-Key semantics of the Lambda adapters, for any Go HTTP
// server (ECS, EKS, App Runner, Lambda Web Adapter; chi, gorilla/mux and
// echo take the same func(http.Handler) http.Handler):
//
//	idem, err := httpapi.Middleware(store, httpapi.WithRequestScope(callerOf))
//	if err != nil {
//		log.Fatal(err)
//	}
//	http.Handle("POST /payments", idem(http.HandlerFunc(createPayment)))
//
// It reads the key, the scope and the fingerprint as the adapters do, and
// answers with the same statuses and problem types, stores the same
// responses and replays them with Idempotent-Replayed: true (see the
// package documentation). It takes the adapters' options and the core's,
// and WithRequestScope and WithMaxBodySize, which apply to it only; the
// options it does not take are an error: the core's that select keys from
// typed inputs, and idempotency.WithTransactions, because the response goes
// to the client as the handler writes it, before a commit could fail.
// Without idempotency.WithKeyPrefix, the prefix is DefaultMiddlewarePrefix.
//
// The request body of a request that carries a key is read whole (at most
// WithMaxBodySize bytes, else 413 with ProblemBodyTooLarge), fingerprinted,
// and given to the handler unchanged, as Body and GetBody. The handler
// writes to a ResponseWriter that sends its response as it writes it and
// records it, status, headers, body and trailers: the headers the handler
// sets, not those that handlers around the middleware set before it ran,
// which belong to each response. The writer implements Unwrap, so
// http.ResponseController reaches the server's writer (SetWriteDeadline,
// EnableFullDuplex).
//
// A response that cannot be recorded whole is not replayed: when the
// handler flushes (http.Flusher, ResponseController.Flush), the response
// is streamed, and when it hijacks the connection (a protocol upgrade),
// the response is written outside the writer. The request has executed,
// so its key is completed, without the response, unless the status says
// otherwise (see Which responses are stored in the package documentation):
// retries get 500 with ProblemResponseNotStored, never part of a
// response. A handler that panics releases the key; it is answered 500
// with ProblemHandlerFailed when it had written nothing (with the headers
// the response had before it ran, none it set), and otherwise its
// connection is aborted (http.ErrAbortHandler), so that the client does
// not take the part it got for a whole response.
//
// Servers give requests no deadline, so a reservation is a lease
// (idempotency.DefaultLease, 30 seconds), renewed while the handler runs:
// a handler that runs for minutes keeps its key, and the key of a server
// that dies lapses within one lease (idempotency.WithLease sets it). A
// deadline in the request's context (http.TimeoutHandler, a middleware of
// your own) bounds the lease, as on Lambda. The handler's context is the
// request's, which net/http cancels when the client goes away; a handler
// whose side effect must finish even then should detach it
// (context.WithoutCancel), since the client's retry will ask for its
// result.
//
// It fails if store is nil or an option is invalid. The middleware panics
// when given a nil handler. When POWERTOOLS_IDEMPOTENCY_DISABLED is true
// it returns the handler itself (after checking the options).
func Middleware(store persistence.Store, opts ...idempotency.MiddlewareOption) (func(http.Handler) http.Handler, error) {
	const name = "httpapi: Middleware"
	prefix := DefaultMiddlewarePrefix
	if function := os.Getenv(core.EnvFunctionName); function != "" {
		prefix = function + "." + prefix
	}
	shared, err := newEngine(name, middlewareEntry, store, prefix, opts)
	if err != nil {
		return nil, err
	}
	disabled := core.Disabled()
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic(name + ": nil handler")
		}
		if disabled {
			return next
		}
		// Each handler has its own estimate of how long it takes.
		return &middleware{e: &engine{cfg: shared.cfg, guard: shared.guard}, next: next}
	}, nil
}

// middleware is the handler that Middleware returns.
type middleware struct {
	e    *engine
	next http.Handler
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := strings.ToUpper(r.Method)
	if !m.e.cfg.keyed(method) {
		m.next.ServeHTTP(w, r)
		return
	}
	view := Request{
		Method:       method,
		Path:         r.URL.EscapedPath(),
		Event:        r,
		multiHeaders: r.Header,
		// The answers' headers go where http.Header keeps them.
		multiValueResponse: true,
	}
	if r.URL.RawQuery != "" {
		// As the handler will read it: parameters that do not decode are
		// left out of r.URL.Query() too.
		view.multiQuery = r.URL.Query()
	}
	view.readBody = func() error {
		body, err := readBody(r, m.e.cfg.maxBodySize)
		view.raw = body
		return err
	}
	var rec *recorder
	v := m.e.handle(r.Context(), &view, func(ctx context.Context) (*response, error) {
		req := r.WithContext(ctx)
		if body := view.raw; r.Body != nil && r.Body != http.NoBody {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		rec = newRecorder(w)
		m.next.ServeHTTP(rec, req)
		return rec.result(), nil
	})
	switch {
	case v.pass:
		m.next.ServeHTTP(w, r)
	case v.panicked != nil && (v.panicked.value == http.ErrAbortHandler || rec.wroteHeader):
		// Part of the response may have gone out: cut the connection, so
		// that the client sees a broken response rather than a short one.
		panic(http.ErrAbortHandler)
	case v.answer != nil:
		if rec != nil && !rec.wroteHeader {
			// The handler ran, set headers and sent nothing (a panic):
			// the answer goes out with its own headers, not those of
			// the run that failed.
			rec.restoreHeader()
		}
		writeResponse(w, v.answer)
	}
}

// readBody reads the body of r whole, up to limit bytes; a larger body is
// an *http.MaxBytesError.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	switch {
	case r.Body == nil || r.Body == http.NoBody:
		return nil, nil
	case r.ContentLength > limit:
		return nil, &http.MaxBytesError{Limit: limit}
	case r.ContentLength >= 0:
		// net/http's server ends the body at its length (and fails a
		// shorter one).
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err == nil && int64(len(body)) > limit {
		err = &http.MaxBytesError{Limit: limit}
	}
	return body, err
}
