package main

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/examples/httpserver/paymentserver"
	"github.com/retrysafe/retrysafe/examples/payments/payment/paymenttest"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

func TestClient(t *testing.T) {
	ledger := &paymenttest.Ledger{}
	h, err := paymentserver.New(paymentserver.Config{Store: memory.New(), Ledger: ledger, NewID: paymenttest.IDs(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-url", srv.URL, "-n", "2", "-repeat", "2"}, &out, nil))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	line := regexp.MustCompile(`^([0-9a-f-]{36}) 201 (pay_\d) replayed=(true|false) attempts=1$`)
	var got [][]string
	for _, l := range lines {
		m := line.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		got = append(got, m[1:])
	}
	assert.Equal(t, []string{got[0][0], "pay_1", "false"}, got[0])
	assert.Equal(t, []string{got[0][0], "pay_1", "true"}, got[1], "the repeat, with the same key, is replayed")
	assert.Equal(t, "pay_2", got[2][1])
	assert.NotEqual(t, got[0][0], got[2][0], "each payment has a key of its own")
	assert.Len(t, ledger.Charges(), 2)

	out.Reset()
	require.NoError(t, run(t.Context(), []string{"-url", srv.URL, "-key", "order-7", "-amount", "0"}, &out, nil))
	assert.Equal(t, "order-7 400 https://github.com/retrysafe/retrysafe/blob/main/examples/payments/README.md#invalid-payment replayed=false attempts=1\n", out.String())
	assert.Error(t, run(t.Context(), []string{"-key", "k", "-n", "2"}, &out, nil))
}
