package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
)

// stepsJSON is get --steps -o json.
type stepsJSON struct {
	Key    string `json:"key"`
	Status string `json:"status"`
	Steps  []struct {
		Step     string          `json:"step"`
		State    string          `json:"state"`
		Response json.RawMessage `json:"response"`
	} `json:"steps"`
}

func TestGetListsTheStepsOfAKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		var key string
		fail := true
		h := idempotency.Must(idempotency.Wrap(func(ctx context.Context, c charge) (string, error) {
			key, _ = idempotency.KeyFromContext(ctx)
			id, err := idempotency.Step(ctx, "charge card", func(context.Context) (string, error) { return "ch_1", nil })
			if err != nil || fail {
				fail = false
				return "", errors.Join(err, errors.New("the ledger is down"))
			}
			return idempotency.Step(ctx, "ledger", func(context.Context) (string, error) { return id + " booked", nil })
		}, f.store, idempotency.WithKeyPrefix("payments")))
		_, err := h(t.Context(), charge{OrderID: "o-1", Amount: 100})
		require.Error(t, err)

		// Released: no record, and the step that a retry resumes after.
		r := runCmd(t, f.with("get", key, "--steps", "-o", "json")...)
		requireOK(t, r)
		var g stepsJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &g), r.stdout)
		require.Empty(t, g.Key)
		require.Len(t, g.Steps, 1, r.stdout)
		require.Equal(t, "charge card", g.Steps[0].Step)
		require.Equal(t, "completed", g.Steps[0].State)
		require.JSONEq(t, `"ch_1"`, string(g.Steps[0].Response))

		r = runCmd(t, f.with("get", key, "--steps")...)
		requireOK(t, r)
		require.Contains(t, r.stdout, "a retry resumes after its steps")
		require.Contains(t, r.stdout, "charge card")

		_, err = h(t.Context(), charge{OrderID: "o-1", Amount: 100})
		require.NoError(t, err)
		r = runCmd(t, f.with("get", key, "--steps", "-o", "json")...)
		requireOK(t, r)
		g = stepsJSON{}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &g), r.stdout)
		require.Equal(t, key, g.Key)
		require.Equal(t, "COMPLETED", g.Status)
		require.Len(t, g.Steps, 2, r.stdout)

		// Without --steps, get shows the record alone.
		r = runCmd(t, f.with("get", key, "-o", "json")...)
		requireOK(t, r)
		require.NotContains(t, r.stdout, `"steps"`)
	})
}
