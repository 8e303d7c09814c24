package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/faultstore"
	"github.com/retrysafe/retrysafe/internal/testing/testlog"
	"github.com/retrysafe/retrysafe/jmespath"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// foreignOption is an option kind made outside the module: it compiles,
// and is refused when the handler is wrapped.
type foreignOption struct{ idempotency.WrapOption }

func TestWrapRejectsBadOptions(t *testing.T) {
	var c counter
	for name, opts := range map[string][]idempotency.WrapOption{
		"invalid key expression":        {idempotency.WithKey("order_id[")},
		"unknown function":              {idempotency.WithKey("nope(body)")},
		"order-dependent key":           {idempotency.WithKey("headers.*")},
		"order-dependent validation":    {idempotency.WithPayloadValidation("keys(@)")},
		"invalid validation expression": {idempotency.WithPayloadValidation("[")},
		"expiry too short":              {idempotency.WithExpiry(0)},
		"empty prefix":                  {idempotency.WithKeyPrefix("")},
		"nil logger":                    {idempotency.WithLogger(nil)},
		"hook of another type":          {idempotency.WithResponseHook(func(_ context.Context, s string, _ *persistence.Record) string { return s })},
		"nil option":                    {nil},
		"in-progress timeout":           {idempotency.WithLease(-time.Second)},
		"final write timeout":           {idempotency.WithFinalWriteTimeout(0)},
		"nil classifier":                {idempotency.WithPermanentErrors(nil)},
		"nil decoder":                   {idempotency.WithErrorDecoder(nil)},
		"nil observer":                  {idempotency.WithObserver(nil)},
		"given twice":                   {idempotency.WithExpiry(time.Hour), idempotency.WithExpiry(2 * time.Hour)},
		"an option made elsewhere":      {foreignOption{}},
	} {
		_, err := idempotency.Wrap(c.handle, memory.New(), opts...)
		require.Error(t, err, name)
		assert.True(t, strings.HasPrefix(err.Error(), "idempotency: "), "%s: %v", name, err)
	}
	_, err := idempotency.Wrap(c.handle, memory.New(), idempotency.WithKey("order_id["))
	assert.ErrorIs(t, err, jmespath.ErrInvalidExpression)

	_, err = idempotency.Wrap(c.handle, nil)
	assert.Error(t, err, "nil store")
	_, err = idempotency.Wrap[order, receipt](nil, memory.New())
	assert.Error(t, err, "nil handler")
	assert.Panics(t, func() { idempotency.Must(idempotency.Wrap(c.handle, memory.New(), idempotency.WithKey("["))) })

	_, err = idempotency.Wrap(c.handle, memory.New(), idempotency.WithExpiry(time.Hour), idempotency.WithExpiry(time.Hour))
	assert.EqualError(t, err, "idempotency: Wrap: idempotency.WithExpiry given twice; give it once")
}

func TestMissingKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input map[string]any
	}{
		{"absent", map[string]any{"other": 1}},
		{"null", map[string]any{"id": nil}},
		{"empty string", map[string]any{"id": ""}},
		{"empty array", map[string]any{"id": []any{}}},
		{"array of nulls", map[string]any{"id": []any{nil, nil}}},
		{"object of nulls", map[string]any{"id": map[string]any{"a": nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			h := func(context.Context, map[string]any) (int, error) { runs++; return runs, nil }
			var ev eventLog
			logger, logs := testlog.Text()
			loose := mustWrap(t, h, memory.New(), idempotency.WithKey("id"), idempotency.WithObserver(&ev), idempotency.WithLogger(logger))
			for range 2 {
				_, err := loose(t.Context(), tc.input)
				require.NoError(t, err)
			}
			assert.Equal(t, 2, runs, "without a key the handler runs unprotected")
			assert.Equal(t, []string{"no_key", "no_key"}, ev.list(), "unprotected calls: no store request, no step")
			assert.Contains(t, logs.String(), "level=WARN")

			strict := mustWrap(t, h, memory.New(), idempotency.WithKey("id"), idempotency.WithRequireKey())
			_, err := strict(t.Context(), tc.input)
			var ke *idempotency.KeyError
			require.ErrorAs(t, err, &ke)
			assert.ErrorIs(t, err, idempotency.ErrNoKey)
			assert.Equal(t, "id", ke.Expression)
			assert.Nil(t, ke.Err)
			assert.Equal(t, 2, runs)
		})
	}
	// Present values, including zero and false, are keys.
	for _, v := range []any{0.0, false, "0", []any{nil, 1.0}, map[string]any{"a": 0.0}} {
		runs := 0
		h := mustWrap(t, func(context.Context, map[string]any) (int, error) { runs++; return runs, nil },
			memory.New(), idempotency.WithKey("id"), idempotency.WithRequireKey())
		for range 2 {
			_, err := h(t.Context(), map[string]any{"id": v})
			require.NoError(t, err, "%#v", v)
		}
		assert.Equal(t, 1, runs, "%#v", v)
	}
}

func TestMalformedInputIsAKeyError(t *testing.T) {
	runs := 0
	h := mustWrap(t, func(context.Context, map[string]any) (int, error) { runs++; return 0, nil },
		memory.New(), idempotency.WithKey("powertools_json(body).order_id"))
	for _, body := range []any{"{not json", 42.0} {
		_, err := h(t.Context(), map[string]any{"body": body})
		var ke *idempotency.KeyError
		require.ErrorAs(t, err, &ke, "%#v", body)
		assert.ErrorIs(t, err, idempotency.ErrNoKey)
		require.Error(t, ke.Err)
	}
	_, err := h(t.Context(), map[string]any{"body": "{not json"})
	assert.ErrorIs(t, err, jmespath.ErrInvalidJSON)
	assert.Equal(t, 0, runs, "a malformed input must not run the handler unprotected")
}

func TestKeyIgnoresMemberOrderAndNumberSpelling(t *testing.T) {
	var keys []string
	h := mustWrap(t, func(ctx context.Context, in json.RawMessage) (string, error) {
		key, _ := idempotency.KeyFromContext(ctx)
		keys = append(keys, key)
		return key, nil
	}, memory.New(), idempotency.WithKey("powertools_json(body)"))
	for i, body := range []string{
		`{"order": {"id": 1, "lines": [1.0, 2]}, "customer": "c"}`,
		`{"customer":"c","order":{"lines":[1,2.00],"id":1e0}}`,
	} {
		in, err := json.Marshal(map[string]string{"body": body})
		require.NoError(t, err)
		got, err := h(t.Context(), in)
		require.NoError(t, err)
		assert.Equal(t, keys[0], got, "input %d", i)
	}
	assert.Len(t, keys, 1, "the second input is a replay")
}

func TestStructAndJSONInputsShareKeys(t *testing.T) {
	store := memory.New()
	var c counter
	typed := mustWrap(t, c.handle, store, idempotency.WithKeyPrefix("p"))
	raw := mustWrap(t, func(context.Context, json.RawMessage) (receipt, error) {
		return receipt{}, errors.New("must not run")
	}, store, idempotency.WithKeyPrefix("p"))
	first, err := typed(t.Context(), o1)
	require.NoError(t, err)
	got, err := raw(t.Context(), json.RawMessage(`{"amount":100,"customer":"c-1","order_id":"o-1"}`))
	require.NoError(t, err)
	assert.Equal(t, first, got)
}

func TestDisabledByEnvironment(t *testing.T) {
	for _, v := range []string{"1", "true", "TRUE", "yes", "on", "y", "t"} {
		t.Setenv(envDisabled, v)
		var c counter
		charge := mustWrap(t, c.handle, memory.New())
		for range 2 {
			_, err := charge(t.Context(), o1)
			require.NoError(t, err)
		}
		assert.Equal(t, 2, c.count(), "disabled with %q: the handler runs every time", v)
		_, err := idempotency.Wrap(c.handle, memory.New(), idempotency.WithKey("["))
		assert.Error(t, err, "options are still checked")
	}
	for _, v := range []string{"", "0", "false", "no", "off"} {
		t.Setenv(envDisabled, v)
		var c counter
		charge := mustWrap(t, c.handle, memory.New())
		for range 2 {
			_, err := charge(t.Context(), o1)
			require.NoError(t, err)
		}
		assert.Equal(t, 1, c.count(), "not disabled with %q", v)
	}
}

// With the switch on, Wrap is invisible: the handler's own values and
// errors, an error marked Permanent without the mark (Lambda reports the
// dynamic type's name as errorType), as Guard.Do does.
func TestWrapWhenDisabled(t *testing.T) {
	t.Setenv(envDisabled, "true")
	declined := &declinedError{}
	charge := mustWrap(t, func(context.Context, order) (receipt, error) {
		return receipt{ChargeID: "partial"}, idempotency.Permanent(declined)
	}, memory.New())
	for range 2 {
		got, err := charge(t.Context(), o1)
		require.Same(t, declined, err)
		assert.Equal(t, receipt{ChargeID: "partial"}, got)
	}
}

func TestGuardWhenDisabled(t *testing.T) {
	t.Setenv(envDisabled, "true")
	g, err := idempotency.NewGuard(memory.New())
	require.NoError(t, err)
	declined := &declinedError{}
	for range 2 {
		_, err := g.Do(t.Context(), "k", "", func(context.Context) ([]byte, error) {
			return nil, idempotency.Permanent(declined)
		})
		require.Same(t, declined, err)
	}
}

// The environment variables that Wrap reads, with Powertools' names.
const (
	envDisabled     = "POWERTOOLS_IDEMPOTENCY_DISABLED"
	envFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
)

func handlerForPrefix(context.Context, order) (receipt, error) { return receipt{}, nil }

func TestDefaultKeyPrefix(t *testing.T) {
	prefix := func(h func(context.Context, order) (receipt, error)) string {
		store := &faultstore.Store{Inner: memory.New(), KeepUpdates: true}
		_, err := mustWrap(t, h, store)(t.Context(), o1)
		require.NoError(t, err)
		p, _, _ := strings.Cut(store.Updates()[0].Key, "#")
		return p
	}
	t.Setenv(envFunctionName, "")
	assert.Equal(t, "idempotency_test.handlerForPrefix", prefix(handlerForPrefix))
	t.Setenv(envFunctionName, "payments")
	assert.Equal(t, "payments.idempotency_test.handlerForPrefix", prefix(handlerForPrefix))

	var seen string
	h := mustWrap(t, func(ctx context.Context, o order) (receipt, error) {
		seen, _ = idempotency.KeyFromContext(ctx)
		return receipt{}, nil
	}, memory.New())
	_, err := h(t.Context(), o1)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(seen, "payments.idempotency_test.TestDefaultKeyPrefix.func"), seen)

	g, err := idempotency.NewGuard(memory.New())
	require.NoError(t, err)
	_, err = g.Do(t.Context(), "k", "", func(ctx context.Context) ([]byte, error) {
		seen, _ = idempotency.KeyFromContext(ctx)
		return nil, nil
	})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(seen, "payments#"), seen)
}

func TestTwoWrappedFunctionsDoNotShareKeys(t *testing.T) {
	t.Setenv(envFunctionName, "orders")
	store := memory.New()
	var a, b counter
	wa := mustWrap(t, a.handle, store)
	wb := mustWrap(t, func(ctx context.Context, o order) (receipt, error) { return b.handle(ctx, o) }, store)
	_, err := wa(t.Context(), o1)
	require.NoError(t, err)
	_, err = wb(t.Context(), o1)
	require.NoError(t, err)
	assert.Equal(t, 1, a.count())
	assert.Equal(t, 1, b.count())
}

func TestEventKindNames(t *testing.T) {
	assert.Equal(t, "settled", idempotency.EventSettled.String())
	assert.Equal(t, "unknown", idempotency.EventKind(0).String())
	assert.Equal(t, "unknown", (idempotency.EventStep + 1).String())
	for k := idempotency.EventStoreRequest; k <= idempotency.EventStep; k++ {
		assert.NotEqual(t, "unknown", k.String(), int(k))
	}
}

func TestErrorMessagesAndTypes(t *testing.T) {
	until := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cause := errors.New("cause")
	for _, tc := range []struct {
		err      error
		sentinel error
		message  string
	}{
		{&idempotency.InProgressError{Key: "k"}, idempotency.ErrInProgress, "idempotency: key k is in progress in another invocation"},
		{&idempotency.InProgressError{Key: "k", Until: until}, idempotency.ErrInProgress, "idempotency: key k is in progress in another invocation (reserved until 2026-12-02T12:00:00Z)"},
		{&idempotency.PayloadMismatchError{Key: "k"}, idempotency.ErrPayloadMismatch, "idempotency: key k was already used with a different payload"},
		{&idempotency.KeyError{Expression: "id"}, idempotency.ErrNoKey, `idempotency: key expression "id" selected no idempotency key (null, empty or only nulls)`},
		{&idempotency.KeyError{Err: cause}, idempotency.ErrNoKey, "idempotency: selecting the idempotency key with the input: cause"},
		{&idempotency.StoreError{Op: "put", Key: "k", Err: cause}, idempotency.ErrStore, "idempotency: store put of key k failed: cause"},
		{&idempotency.ResponseTooLargeError{Key: "k"}, nil, "idempotency: key k completed, but its response was too large to store and cannot be replayed"},
		{&idempotency.ReplayError{Key: "k", Err: cause}, cause, "idempotency: cannot replay the stored response of key k: cause"},
		{&idempotency.RecordedError{Type: "T", Message: "original"}, nil, "original"},
	} {
		if tc.sentinel != nil {
			assert.ErrorIs(t, tc.err, tc.sentinel)
		}
		assert.Equal(t, tc.message, tc.err.Error())
	}
	assert.ErrorIs(t, &idempotency.StoreError{Err: cause}, cause)
	assert.Nil(t, idempotency.Permanent(nil))
	assert.Equal(t, "x", idempotency.Permanent(errors.New("x")).Error())
}
