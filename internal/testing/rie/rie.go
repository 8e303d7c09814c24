// Package rie runs Lambda functions locally under the AWS Lambda Runtime
// Interface Emulator (RIE), for the end-to-end tests and the demo of this
// module: each Instance is one aws-lambda-rie process, that is, one Lambda
// execution environment, running a function's bootstrap binary.
//
// The emulator is built from the Go module proxy, once per machine (see
// Binary); functions are built for the host with BuildFunction. Instances
// listen on free loopback ports (127.0.0.1 only) and are stopped with their
// whole process tree, also when the process that started them dies
// without cleaning up.
//
// # The emulator's two modes
//
// By default (Config.MaxConcurrency 0 or 1) an instance behaves like a
// classic Lambda execution environment: one invocation at a time. The
// emulator crashes when it is sent a second invocation while one runs, so
// Invoke queues invocations of one instance. On timeout
// (Config.Timeout, AWS_LAMBDA_FUNCTION_TIMEOUT) the emulator kills the
// runtime process, answers "Task timed out after N.00 seconds", and starts
// a new runtime process (a new init) on the next invocation, as Lambda
// does.
//
// With Config.MaxConcurrency above 1 the emulator runs in its
// multi-concurrency mode (AWS_LAMBDA_MAX_CONCURRENCY, as on Lambda Managed
// Instances): one runtime process receives up to that many invocations at
// once; aws-lambda-go reads the same variable and polls for invocations
// with that many goroutines. Invocations beyond that are refused with
// Runtime.Unavailable, which Invoke retries. This mode differs in ways
// that matter to tests:
//
//   - It ignores the bootstrap given on its command line and only runs
//     /var/runtime/bootstrap, /var/task/bootstrap or /opt/bootstrap, in
//     /var/task, as Lambda's sandbox user (uid 993, gid 990). The package
//     therefore runs it in private mount and PID namespaces (util-linux
//     unshare) where the function's binary is mounted at
//     /var/task/bootstrap. Both need root: elsewhere StartContext returns
//     an error that matches ErrUnavailable.
//   - A timeout does not stop the invocation: it goes on running, its late
//     response is refused, aws-lambda-go then exits, and the emulator shuts
//     down. Test timeouts in the classic mode.
//
// # Logs
//
// The emulator prints its own lines and the function's output (START, END,
// REPORT and, in the classic mode, "INIT REPORT(durationMs: ...)") on its
// standard output; an Instance keeps them (Logs), parses the init reports
// (InitReports), and copies them to Config.Output when set.
package rie

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// ErrUnavailable is matched (with errors.Is) by the errors of Binary and
// StartContext when the emulator cannot run here: it cannot be built, or
// the multi-concurrency mode's namespaces are not permitted.
var ErrUnavailable = errors.New("rie: emulator not available")

// InvokePath is the emulator's invocation endpoint, as in Lambda's Invoke
// API.
const InvokePath = "/2015-03-31/functions/function/invocations"

// Config describes one execution environment.
type Config struct {
	// Bootstrap is the path of the function's executable (see
	// BuildFunction). Required.
	Bootstrap string

	// Env is the function's environment, added to (and overriding) this
	// process's environment, from which the variables that configure the
	// emulator (AWS_LAMBDA_*, _HANDLER, LOG_LEVEL) are removed first. The
	// emulator passes its whole environment on to the function.
	Env []string

	// Timeout is the function's timeout, AWS_LAMBDA_FUNCTION_TIMEOUT, in
	// whole seconds (rounded up). Default 30 seconds.
	Timeout time.Duration

	// FunctionName is AWS_LAMBDA_FUNCTION_NAME. Default "function".
	FunctionName string

	// MaxConcurrency above 1 runs the emulator in its multi-concurrency
	// mode, with AWS_LAMBDA_MAX_CONCURRENCY set to it (see the package
	// documentation).
	MaxConcurrency int

	// Output, when set, receives a copy of everything the emulator and the
	// function print, line by line.
	Output io.Writer
}

// DefaultTimeout is the function timeout of a Config without one.
const DefaultTimeout = 30 * time.Second

// Instance is a running emulator: one execution environment.
type Instance struct {
	// URL is the emulator's invocation endpoint,
	// http://127.0.0.1:<port>/2015-03-31/functions/function/invocations.
	URL string

	cfg    Config
	client *http.Client
	slots  chan struct{} // invocations the instance accepts at once
	cmd    *exec.Cmd
	stage  string // the multi-concurrency mode's mount source, removed on Stop
	exited chan struct{}

	mu     sync.Mutex
	lines  []string
	inits  []InitReport
	logged chan struct{} // closed and replaced when a line is scanned

	stopOnce sync.Once
	stopErr  error
}

// InitReport is an init phase of the function, from the emulator's INIT
// REPORT line.
type InitReport struct {
	// Duration is the init phase's duration: from the start of the runtime
	// process until it asks for its first invocation.
	Duration time.Duration
	// Line is the emulator's line.
	Line string
}

// Start starts an instance for the test tb and stops it when tb ends; when
// tb has failed by then, it logs the last lines the instance printed. If
// the emulator is unavailable, it skips tb (fails it when
// IDEMPOTENCY_REQUIRE_INTEGRATION=1). Any other failure fails tb.
func Start(tb testenv.TB, cfg Config) *Instance {
	tb.Helper()
	in, err := StartContext(tb.Context(), cfg)
	if err != nil {
		SkipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := in.Stop(); err != nil {
			tb.Errorf("stopping the emulator: %v", err)
		}
		if tb.Failed() {
			tb.Logf("last lines of the emulator at %s:\n%s", in.URL, strings.Join(in.Tail(60), "\n"))
		}
	})
	return in
}

// SkipOrFail skips tb for an error that matches ErrUnavailable, unless
// IDEMPOTENCY_REQUIRE_INTEGRATION=1, and fails it for any other error.
func SkipOrFail(tb testenv.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrUnavailable) {
		testenv.SkipUnlessRequired(tb, err)
	}
	tb.Fatal(err)
}

// maxLines bounds the lines an Instance keeps.
const maxLines = 50_000

// StartContext starts an instance and returns it once it accepts
// invocations; the caller must Stop it. ctx bounds the start only. The
// runtime process starts on the first invocation (classic mode) or at once
// (multi-concurrency mode).
func StartContext(ctx context.Context, cfg Config) (*Instance, error) {
	if cfg.Bootstrap == "" {
		return nil, errors.New("rie: Config.Bootstrap is empty")
	}
	bootstrap, err := filepath.Abs(cfg.Bootstrap)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bootstrap); err != nil {
		return nil, fmt.Errorf("rie: %w", err)
	}
	cfg.Bootstrap = bootstrap
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.FunctionName == "" {
		cfg.FunctionName = "function"
	}
	if err := platformSupported(); err != nil {
		return nil, err
	}
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConcurrency > 1 {
		if err := checkSandbox(ctx); err != nil {
			return nil, err
		}
	}

	// The ports are picked free and then released for the emulator to bind,
	// so another process can take one in between: start again on new ports
	// when that happens.
	for attempt := 1; ; attempt++ {
		in, err := start(ctx, bin, cfg)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			return in, err
		}
	}
}

var errPortTaken = errors.New("address already in use")

func start(ctx context.Context, bin string, cfg Config) (*Instance, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	in := &Instance{
		URL:    "http://" + addr + InvokePath,
		cfg:    cfg,
		slots:  make(chan struct{}, max(1, cfg.MaxConcurrency)),
		exited: make(chan struct{}),
		logged: make(chan struct{}),
		// No client timeout: an invocation lasts as long as the function's
		// timeout, and the caller's context bounds it.
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: max(2, cfg.MaxConcurrency),
			DisableCompression:  true,
		}},
	}
	if cfg.MaxConcurrency > 1 {
		in.stage, err = os.MkdirTemp("", "rie-sandbox-")
		if err != nil {
			return nil, err
		}
		in.cmd, err = sandboxCommand(in.stage, bin, cfg.Bootstrap, args)
		if err != nil {
			os.RemoveAll(in.stage)
			return nil, err
		}
	} else {
		in.cmd = exec.Command(bin, append(args, cfg.Bootstrap)...)
		in.cmd.Dir = filepath.Dir(cfg.Bootstrap)
		// On SIGTERM the emulator kills the runtime process, which runs in
		// a process group of its own, and exits.
		setProcAttrs(in.cmd, syscall.SIGTERM)
	}
	in.cmd.Env = environment(cfg)
	out, err := in.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	in.cmd.Stderr = in.cmd.Stdout
	if err := in.cmd.Start(); err != nil {
		os.RemoveAll(in.stage)
		return nil, fmt.Errorf("rie: starting %s: %w", bin, err)
	}
	scanned := make(chan struct{})
	go func() {
		in.scan(out)
		close(scanned)
	}()
	go func() {
		// Wait only after the output is read: Wait closes the pipe.
		<-scanned
		_ = in.cmd.Wait()
		close(in.exited)
	}()

	if err := in.waitReady(ctx, addr); err != nil {
		_ = in.Stop()
		if strings.Contains(strings.Join(in.Logs(), "\n"), "address already in use") {
			return nil, fmt.Errorf("rie: %w: %v", errPortTaken, err)
		}
		return nil, fmt.Errorf("rie: the emulator did not start: %w\n%s", err, strings.Join(in.Tail(30), "\n"))
	}
	return in, nil
}

// environment returns the emulator's (and the function's) environment.
func environment(cfg Config) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_LAMBDA_") || name == "_HANDLER" || name == "LOG_LEVEL" {
			continue
		}
		env = append(env, kv)
	}
	secs := int((cfg.Timeout + time.Second - 1) / time.Second)
	env = append(env,
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(secs),
		"AWS_LAMBDA_FUNCTION_NAME="+cfg.FunctionName,
		"LOG_LEVEL=info",
	)
	if cfg.MaxConcurrency > 1 {
		env = append(env, "AWS_LAMBDA_MAX_CONCURRENCY="+strconv.Itoa(cfg.MaxConcurrency))
	}
	// Later entries win (os/exec keeps the last of duplicate names).
	return append(env, cfg.Env...)
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("rie: no free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (in *Instance) waitReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, testenv.StartTimeout)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-in.exited:
			return errors.New("it exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var initReportRE = regexp.MustCompile(`INIT REPORT\(.*?durationMs: ([0-9.]+)`)

func (in *Instance) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		in.mu.Lock()
		if len(in.lines) == maxLines {
			in.lines = append(in.lines[:0], in.lines[maxLines/2:]...)
		}
		in.lines = append(in.lines, line)
		if m := initReportRE.FindStringSubmatch(line); m != nil {
			if ms, err := strconv.ParseFloat(m[1], 64); err == nil {
				in.inits = append(in.inits, InitReport{Duration: time.Duration(ms * float64(time.Millisecond)), Line: line})
			}
		}
		close(in.logged)
		in.logged = make(chan struct{})
		in.mu.Unlock()
		if in.cfg.Output != nil {
			fmt.Fprintln(in.cfg.Output, line)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Logs returns the lines the instance printed so far (the last 50,000 at
// most).
func (in *Instance) Logs() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.lines...)
}

// Tail returns the last n lines the instance printed.
func (in *Instance) Tail(n int) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.lines[max(0, len(in.lines)-n):]...)
}

// InitReports returns the init phases reported so far, one per runtime
// process the instance started. The multi-concurrency mode does not print
// them.
func (in *Instance) InitReports() []InitReport {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]InitReport(nil), in.inits...)
}

// PID returns the process ID of the emulator, or of unshare, which starts
// it, in the multi-concurrency mode.
func (in *Instance) PID() int { return in.cmd.Process.Pid }

// WaitInitReports waits until n init phases have been reported, and
// returns the reports. The emulator prints its lines before it answers,
// but they are read concurrently: a report may arrive after the
// invocation's response.
func (in *Instance) WaitInitReports(ctx context.Context, n int) ([]InitReport, error) {
	for {
		in.mu.Lock()
		reports, logged := append([]InitReport(nil), in.inits...), in.logged
		in.mu.Unlock()
		if len(reports) >= n {
			return reports, nil
		}
		select {
		case <-logged:
		case <-in.exited:
			return reports, fmt.Errorf("rie: the emulator exited after %d init reports, want %d", len(reports), n)
		case <-ctx.Done():
			return reports, fmt.Errorf("rie: %d init reports, want %d: %w", len(reports), n, ctx.Err())
		}
	}
}

// Exited is closed when the emulator has exited.
func (in *Instance) Exited() <-chan struct{} { return in.exited }

// Response is the emulator's answer to an invocation.
type Response struct {
	// StatusCode is the emulator's HTTP status: 200 for every invocation
	// that reached the function, whether it succeeded, failed or timed out.
	StatusCode int
	// Header is the emulator's HTTP header.
	Header http.Header
	// Payload is the function's response, or the error the emulator
	// reports.
	Payload []byte
}

// FunctionError is a failed invocation: the function returned an error or
// panicked, or it timed out.
type FunctionError struct {
	// Type is the error's type, as Lambda reports it ("errorString",
	// "Sandbox.Timedout", ...).
	Type string
	// Message is the error message.
	Message string
}

// Error describes the function's error.
func (e *FunctionError) Error() string { return "rie: function error " + e.Type + ": " + e.Message }

// TimeoutType is the FunctionError.Type of an invocation that timed out.
const TimeoutType = "Sandbox.Timedout"

var timedOutRE = regexp.MustCompile(`^Task timed out after [0-9.]+ seconds$`)

// Err returns the function's error, as a *FunctionError, or nil when the
// function returned a response. The classic mode answers a timed-out
// invocation with a bare "Task timed out after N.00 seconds" and an error
// without any header; the multi-concurrency mode adds an Error-Type header.
func (r *Response) Err() error {
	if r.StatusCode != http.StatusOK {
		return &FunctionError{Type: r.Header.Get("Error-Type"), Message: fmt.Sprintf("emulator status %d: %s", r.StatusCode, r.Payload)}
	}
	if timedOutRE.Match(r.Payload) {
		return &FunctionError{Type: TimeoutType, Message: string(r.Payload)}
	}
	var e struct {
		Type    *string `json:"errorType"`
		Message string  `json:"errorMessage"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(r.Payload), []byte("{")) && json.Unmarshal(r.Payload, &e) == nil && e.Type != nil {
		if t := r.Header.Get("Error-Type"); t != "" {
			*e.Type = t
		}
		return &FunctionError{Type: *e.Type, Message: e.Message}
	}
	return nil
}

// Invoke invokes the function with payload and returns the emulator's
// answer. It waits while the instance runs as many invocations as it
// accepts (one in the classic mode), and retries invocations that the
// multi-concurrency mode refuses with Runtime.Unavailable, which never
// reached the function. It fails if the emulator cannot be reached or
// ctx ends first; a function error or timeout is a Response (see
// Response.Err).
func (in *Instance) Invoke(ctx context.Context, payload []byte) (*Response, error) {
	return in.InvokeTenant(ctx, "", payload)
}

// InvokeTenant is Invoke for tenant, as an invocation of a function in
// tenant isolation mode (the emulator's X-Amz-Tenant-Id header, which the
// runtime API passes on as Lambda-Runtime-Aws-Tenant-Id). An empty tenant
// is none.
func (in *Instance) InvokeTenant(ctx context.Context, tenant string, payload []byte) (*Response, error) {
	select {
	case in.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-in.exited:
		return nil, errors.New("rie: the emulator has exited")
	}
	defer func() { <-in.slots }()

	delay := 2 * time.Millisecond
	for {
		resp, err := in.post(ctx, tenant, payload)
		if err != nil {
			select {
			case <-in.exited:
				return nil, fmt.Errorf("rie: the emulator has exited: %w", err)
			default:
				return nil, err
			}
		}
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(resp.Payload, []byte(`"Runtime.Unavailable"`)) {
			return resp, nil
		}
		// A runtime worker that has just answered has not asked for its
		// next invocation yet.
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// invokeGrace is how long past the function's timeout an invocation may
// take before post gives up on the emulator: it answers a timed-out
// invocation at the timeout, so a longer wait means it is stuck, and a test
// should fail rather than hang. It is as generous as a start (a loaded
// machine delays the answer too).
const invokeGrace = testenv.StartTimeout

func (in *Instance) post(ctx context.Context, tenant string, payload []byte) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, in.cfg.Timeout+invokeGrace)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set("X-Amz-Tenant-Id", tenant)
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("rie: reading the invocation's response: %w", err)
	}
	return &Response{StatusCode: resp.StatusCode, Header: resp.Header, Payload: body}, nil
}

// Stop stops the emulator and the function's processes, and waits for the
// emulator to exit. It asks the emulator to shut down first (it then kills
// the runtime process, which runs in a process group of its own), and
// kills whatever is left after a few seconds. It may be called more than
// once.
func (in *Instance) Stop() error {
	in.stopOnce.Do(func() {
		in.client.CloseIdleConnections()
		terminate(in.cmd)
		select {
		case <-in.exited:
		case <-time.After(5 * time.Second):
			kill(in.cmd)
			select {
			case <-in.exited:
			case <-time.After(30 * time.Second):
				in.stopErr = fmt.Errorf("rie: the emulator (pid %d) did not exit", in.cmd.Process.Pid)
			}
		}
		// The group may hold processes that outlived the emulator.
		kill(in.cmd)
		if in.stage != "" {
			if err := os.RemoveAll(in.stage); err != nil && in.stopErr == nil {
				in.stopErr = err
			}
		}
	})
	return in.stopErr
}
