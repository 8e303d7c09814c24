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

// Middleware returns a net/http middleware that gives the handlers it
// wraps the Idempotency-Key semantics of the Lambda handlers. It gives the
// same answers and problem types, and stores and replays responses the
// same way (see the package documentation, net/http servers). It fails if
// store is nil or an option is invalid. The middleware panics given a nil
// handler.
//
//	idem, err := httpapi.Middleware(store, httpapi.WithRequestScope(callerOf))
//	if err != nil {
//		log.Fatal(err)
//	}
//	http.Handle("POST /payments", idem(http.HandlerFunc(createPayment)))
func Middleware(store persistence.Store, opts ...idempotency.MiddlewareOption) (func(http.Handler) http.Handler, error) {
	const name = "httpapi: Middleware"
	prefix := defaultMiddlewarePrefix
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
		// Without the library: the handler's steps only run.
		m.next.ServeHTTP(w, r.WithContext(core.WithoutSteps(r.Context())))
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
