//go:build linux || darwin

package main

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
)

// screenLines returns the lines a terminal shows for out: each line as
// its last carriage return left it, without the escape that clears the
// progress line.
func screenLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\x1b[K", ""), "\n") {
		l = strings.TrimRight(l, "\r")
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		lines = append(lines, l)
	}
	return lines
}

// requireFits checks that no line of out is wider than cols, but those
// that show a key whole, as get does.
func requireFits(t *testing.T, out string, cols int) {
	t.Helper()
	for _, l := range screenLines(out) {
		if cols < 120 && strings.Contains(l, "key ") {
			continue
		}
		require.LessOrEqual(t, utf8.RuneCountInString(l), cols, "a line wider than the terminal:\n%s\nin:\n%s", l, out)
	}
}

// Tables fit the terminal: keys are shortened in the middle, with a note
// on how to see them whole, and long text wraps under its column.
func TestTablesFitTheTerminal(t *testing.T) {
	f := dynamoFixture(t)
	putGolden(t, f)
	stuck := goldenRecords[2].Key

	t.Run("120 columns", func(t *testing.T) {
		for _, args := range [][]string{{"ls"}, {"stats"}, {"get", stuck}, {"get", goldenRecords[5].Key}} {
			code, out := onTerminalOf(t, 120, f.with(args...)...).exit()
			require.Equal(t, exitOK, code, out)
			requireFits(t, out, 120)
		}
		code, out := onTerminalOf(t, 120, f.with("ls")...).exit()
		require.Equal(t, exitOK, code, out)
		require.NotContains(t, out, stuck, "keys are shortened")
		require.Contains(t, out, stuck[:strings.IndexByte(stuck, '#')+8], "from their start")
		require.Contains(t, out, stuck[len(stuck)-8:], "to their end")
		require.Contains(t, out, "keys shortened to fit 120 columns: -o wide shows them whole")
	})
	t.Run("80 columns", func(t *testing.T) { // text wraps; get's keys stay whole
		for _, args := range [][]string{{"stats"}, {"get", stuck}} {
			code, out := onTerminalOf(t, 80, f.with(args...)...).exit()
			require.Equal(t, exitOK, code, out)
			requireFits(t, out, 80)
		}
	})
	t.Run("wider", func(t *testing.T) {
		code, out := onTerminalOf(t, 200, f.with("ls")...).exit()
		require.Equal(t, exitOK, code, out)
		require.Contains(t, out, stuck, "keys whole where they fit")
		require.NotContains(t, out, "shortened")
	})
	t.Run("wide", func(t *testing.T) {
		code, out := onTerminalOf(t, 120, f.with("ls", "-o", "wide")...).exit()
		require.Equal(t, exitOK, code, out)
		for _, rec := range goldenRecords {
			require.Contains(t, out, rec.Key)
		}
	})
}

// Ctrl-C at release's question ends it at once, with exit code 130 and
// nothing more said, and releases nothing.
func TestInterruptAtTheQuestion(t *testing.T) {
	f := dynamoFixture(t)
	held := holdKey(t, f, time.Now().Add(time.Minute))
	term := onTerminal(t, f.with("release", held.key)...)
	term.waitFor("[y/N] ")
	term.interrupt()
	code, out := term.exit()
	require.Equal(t, exitInterrupted, code, out)
	_, after, _ := strings.Cut(out, "[y/N] ")
	require.Empty(t, strings.TrimSpace(strings.ReplaceAll(after, "^C", "")), "nothing is said after the interrupt")
	require.Equal(t, "in_progress", getRecord(t, f, held.key).State)
}

// An interrupted scan exits with 130, without a message, nor the notes of
// a scan that ended.
func TestInterruptedScan(t *testing.T) {
	f := dynamoFixture(t)
	putGolden(t, f)
	for _, command := range []string{"ls", "stats"} {
		t.Run(command, func(t *testing.T) {
			// One record a page, a page in 1000s: the scan waits after
			// its first page. The golden records expire in 2030: with
			// --expiry 1h, their age is unknown, which a finished scan
			// would note.
			term := onTerminal(t, f.with(command, "--page-size", "1", "--rate", "0.001", "--expiry", "1h")...)
			term.waitFor("1 records in 1 pages")
			term.interrupt()
			code, out := term.exit()
			require.Equal(t, exitInterrupted, code, out)
			require.NotContains(t, out, "retrysafe")
			require.NotContains(t, out, "expire more than")
		})
	}
}

// Ctrl-C ends key while it reads the event from the terminal.
func TestInterruptWhileReadingTheEvent(t *testing.T) {
	term := onTerminal(t, "key", "--prefix", "p")
	term.waitFor("then Ctrl-D")
	term.interrupt()
	code, out := term.exit()
	require.Equal(t, exitInterrupted, code, out)
	require.NotContains(t, out, "retrysafe key")
}

// blackHole is a server that takes connections and never answers, as a
// wrong port forward or a dead proxy does.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// awsEndpointEnv points the SDK's configuration at the DynamoDB endpoint
// url, with made-up credentials.
func awsEndpointEnv(t *testing.T, url string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_PROFILE":                 "",
		"AWS_EC2_METADATA_DISABLED":   "true",
		"IDEMPOTENCY_TABLE":           "",
		dynalite.EndpointEnv:          url,
		"AWS_REGION":                  "us-east-1",
		"AWS_ACCESS_KEY_ID":           "test",
		"AWS_SECRET_ACCESS_KEY":       "test",
	} {
		t.Setenv(k, v)
	}
}

// A store that takes the connection and never answers fails the command
// with exit code 1 and a message that names the limit, once a request's
// timeout or the command's deadline passes.
func TestStoreThatNeverAnswers(t *testing.T) {
	addr := blackHole(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"DynamoDB, a request", []string{"get", "k", "--table", "table1", "--request-timeout", "100ms"},
			`DynamoDB table "table1" in us-east-1 at http://` + addr + `: no answer within 100ms, the --request-timeout`},
		{"DynamoDB, the command", []string{"ls", "--table", "table1", "--timeout", "300ms"},
			`DynamoDB table "table1" in us-east-1 at http://` + addr + `: not done within 300ms, the --timeout`},
		{"Redis, a request", []string{"stats", "--redis", "redis://" + addr, "--request-timeout", "100ms"},
			"Redis at " + addr + ": no answer within 100ms, the --request-timeout"},
		{"Redis, the command", []string{"get", "k", "--redis", "redis://" + addr, "--timeout", "300ms"},
			"Redis at " + addr + ": not done within 300ms, the --timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awsEndpointEnv(t, "http://"+addr)
			code, out := onTerminal(t, tc.args...).exit()
			require.Equal(t, exitStore, code, out)
			require.Contains(t, out, tc.want)
		})
	}
}

// The SDK's own warnings do not reach the terminal: here, about a Date
// header it cannot parse, which a proxy puts in every answer.
func TestNoSDKWarnings(t *testing.T) {
	f := dynamoFixture(t)
	putGolden(t, f)
	srv := dynalite.Shared(t)
	target, err := url.Parse(srv.Endpoint)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		r.Header.Set("Date", "not a date")
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	server := &http.Server{Handler: proxy}
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(func() { _ = server.Close() })
	t.Setenv(dynalite.EndpointEnv, "http://"+ln.Addr().String())

	code, out := onTerminal(t, f.with("stats", "--page-size", "2")...).exit()
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "total        7")
	require.NotContains(t, out, "WARN")
	require.NotContains(t, out, "SDK 20", "the SDK's logger's lines start with SDK and the date")
}
