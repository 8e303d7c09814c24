package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/core"
	"github.com/retrysafe/retrysafe/persistence"
)

func TestWrittenAt(t *testing.T) {
	now := goldenNow
	for _, tc := range []struct {
		name       string
		expiresAt  time.Time
		expiry     time.Duration
		written    time.Time // zero: unknown
		assumed    time.Duration
		whyMessage string
	}{
		{"an hour's record", now.Add(40 * time.Minute), 0, now.Add(-20 * time.Minute), time.Hour, ""},
		{"written within the last second, its expiry rounded up", now.Add(time.Hour + 900*time.Millisecond), 0, now, time.Hour, "not in the future"},
		{"a day's record", now.Add(23 * time.Hour), 0, now.Add(-time.Hour), 24 * time.Hour, "the HTTP adapters' expiry"},
		{"a fresh day's record", now.Add(24*time.Hour + 500*time.Millisecond), 0, now, 24 * time.Hour, ""},
		{"a week's record", now.Add(6 * 24 * time.Hour), 0, time.Time{}, 0, "longer than both defaults"},
		{"a week's record, with --expiry", now.Add(6 * 24 * time.Hour), 7 * 24 * time.Hour, now.Add(-24 * time.Hour), 7 * 24 * time.Hour, ""},
		{"a day's record, with --expiry 1h", now.Add(23 * time.Hour), time.Hour, time.Time{}, 0, "--expiry is taken as given"},
		{"fresh, with --expiry", now.Add(time.Hour + time.Second), time.Hour, now, time.Hour, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			written, assumed := writtenAt(&persistence.Record{ExpiresAt: tc.expiresAt}, tc.expiry, now)
			assert.Equal(t, tc.written, written, tc.whyMessage)
			assert.Equal(t, tc.assumed, assumed)
		})
	}
}

// Records the library has just written have an age, "now", and no note
// says otherwise: the library rounds expiries up to the next second. The
// HTTP adapters' records, kept for a day, too.
func TestFreshRecordsHaveAnAge(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		quiet := idempotency.WithLogger(slog.New(slog.DiscardHandler))
		wrapped := idempotency.Must(idempotency.Wrap(chargeCard, f.store, idempotency.WithKey("order_id"),
			idempotency.WithKeyPrefix("orders.main.process"), quiet))
		api := idempotency.Must(httpapi.WrapAPIGatewayV2(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		}, f.store, idempotency.WithKeyPrefix("payments.main.createPayment"), quiet))
		for i := range 3 {
			_, err := wrapped(t.Context(), charge{OrderID: "ord_" + strings.Repeat("x", i+1)})
			require.NoError(t, err)
			req := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"idempotency-key": "k" + strings.Repeat("x", i+1)}}
			req.RequestContext.HTTP.Method = "POST"
			_, err = api(t.Context(), req)
			require.NoError(t, err)
		}

		r := runCmd(t, f.with("ls", "-o", "wide")...)
		requireOK(t, r)
		require.Empty(t, r.stderr, "no note")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 7)
		for _, l := range lines[1:] {
			fields := strings.Fields(l)
			assert.NotEqual(t, "?", fields[3], "WRITTEN, in %q", l)
		}

		r = runCmd(t, f.with("stats", "-o", "json")...)
		requireOK(t, r)
		require.Empty(t, r.stderr, "no note")
	})
}

// Records written at the second before an expiry's rounding, with the
// store's clock, as the library writes them.
func TestRoundedExpiryIsNotInTheFuture(t *testing.T) {
	forEachStore(t, func(t *testing.T, f *fixture) {
		now := goldenNow.Add(300 * time.Millisecond) // written at goldenNow+100ms, expiry rounded up
		for _, rec := range []*persistence.Record{
			{Key: core.Key("orders.main.process", "", []byte(`"fresh"`)), Status: persistence.StatusInProgress,
				ExpiresAt: goldenNow.Add(time.Hour + time.Second), InProgressExpiresAt: now.Add(time.Minute), Token: "A"},
			{Key: core.Key("payments.main.createPayment", "", []byte(`"fresh"`)), Status: persistence.StatusInProgress,
				ExpiresAt: goldenNow.Add(24*time.Hour + time.Second), InProgressExpiresAt: now.Add(time.Minute), Token: "B"},
		} {
			require.NoError(t, f.store.Put(t.Context(), rec, now))
		}
		r := runAt(t, now, "", f.with("ls", "-o", "wide")...)
		requireOK(t, r)
		require.Empty(t, r.stderr)
		require.Equal(t, 2, strings.Count(r.stdout, "  now  "), r.stdout)
	})
}

// A completed record's in-progress expiry, which no longer counts, is not
// shown.
func TestCompletedRecordsShowNoInProgressExpiry(t *testing.T) {
	f := dynamoFixture(t)
	putGolden(t, f)
	r := runAt(t, goldenNow, "", f.with("get", goldenRecords[5].Key)...) // completed, with its reservation's
	requireOK(t, r)
	require.NotContains(t, r.stdout, "in progress until")
	require.NotContains(t, r.stdout, "no longer counts")
	r = runAt(t, goldenNow, "", f.with("get", goldenRecords[1].Key)...) // in progress
	requireOK(t, r)
	require.Contains(t, r.stdout, "in progress until  2030-01-02 03:18:35 UTC (in 14m30s)")
}

// help writes flags as the docs do, with two dashes, and so do the
// messages about flags.
func TestHelpWritesFlagsWithTwoDashes(t *testing.T) {
	r := runCmd(t, "help", "ls")
	requireOK(t, r)
	for _, want := range []string{
		"\n  --table table\n",
		"\n  --request-timeout duration\n",
		"(default 5s)",
		"\n  --timeout duration\n",
		"(default 10m)",
		"\n  -o, --output form\n",
		"\n  --pk-function name\n",
	} {
		assert.Contains(t, r.stdout, want)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
			assert.True(t, strings.HasPrefix(line, "  -o, --output"), "one dash only for one letter: %q", line)
		}
	}
	assert.NotContains(t, r.stdout, "--output form\n    \tthe same", "the alias is shown with its flag")

	r = runCmd(t, "key", "--prefix", "p", "--quiet")
	requireFailure(t, r, exitUsage, "flag provided but not defined: --quiet")
	r = runCmd(t, "ls", "--table", "table1", "--page-size", "x")
	requireFailure(t, r, exitUsage, `invalid value "x" for flag --page-size`)
}

// --function is key's, for the default prefix; --pk-function names the
// partition of records under a sort key; each points to the other.
func TestFunctionFlagsHaveTwoNames(t *testing.T) {
	t.Setenv("IDEMPOTENCY_TABLE", "")
	requireFailure(t, runCmd(t, "get", "k", "--table", "table1", "--function", "orders"), exitUsage,
		"flag provided but not defined: --function: the function of key's default prefix; the function in the partition key value of records under a sort key is --pk-function")
	requireFailure(t, runCmd(t, "key", "--pk-function", "orders", "--handler", "main.h"), exitUsage,
		"key's default prefix takes --function")
	requireFailure(t, runCmd(t, "get", "k", "--table", "table1", "--pk-function", "orders"), exitUsage,
		"--static-pk and --pk-function name the partition key value of records under a sort key: give --sort-key-attr too")
}

// An interrupt ends the command with 130 and nothing on stderr.
func TestInterruptExitCode(t *testing.T) {
	f := redisFixture(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errInterrupted)
	var stdout, stderr strings.Builder
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, now: time.Now, getenv: func(string) string { return "" }}
	code := run(ctx, e, f.with("stats"))
	require.Equal(t, exitInterrupted, code)
	require.Empty(t, stderr.String())
	require.Empty(t, stdout.String())
}

func TestTableFitting(t *testing.T) {
	key := core.Key("payments.main.createPayment", "", []byte(`"k"`))
	assert.Equal(t, key, shortenKey(key, len(key)))
	short := shortenKey(key, 50)
	assert.Equal(t, 50, len([]rune(short)))
	assert.True(t, strings.HasPrefix(short, "payments.main.createPayment#"+key[28:28+10]), short)
	assert.True(t, strings.HasSuffix(short, key[len(key)-10:]), short)
	assert.Equal(t, 20, len([]rune(shortenKey(key, 20))), "a prefix too long is shortened too")

	assert.Equal(t, []string{"a call holds", "the key;", "retries"}, wrapText("a call holds the key; retries", 12))
	assert.Equal(t, []string{"unbreakable-word", "x"}, wrapText("unbreakable-word x", 5))

	var b strings.Builder
	tb := newTable(&b, 31)
	tb.wrap = true
	tb.row("STATE", "MEANING")
	tb.row("stuck", "the next retry takes the key over")
	tb.row("total", "2")
	require.NoError(t, tb.flush())
	assert.Equal(t, "STATE  MEANING\nstuck  the next retry takes the\n       key over\ntotal  2\n", b.String())
}
