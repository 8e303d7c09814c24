package rie_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/rie"
)

var (
	buildDir string
	builds   sync.Map // package -> func() (string, error)
)

func TestMain(m *testing.M) {
	var err error
	buildDir, err = os.MkdirTemp("", "rie-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// function returns the bootstrap of a function of testdata, built once.
func function(t *testing.T, name string) string {
	t.Helper()
	build, _ := builds.LoadOrStore(name, sync.OnceValues(func() (string, error) {
		dir := filepath.Join(buildDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		return rie.BuildFunction(context.Background(), "./internal/testing/rie/testdata/"+name, dir)
	}))
	path, err := build.(func() (string, error))()
	require.NoError(t, err)
	return path
}

type probeRequest struct {
	SleepMS int      `json:"sleep_ms,omitempty"`
	Fail    string   `json:"fail,omitempty"`
	Env     []string `json:"env,omitempty"`
	Barrier int      `json:"barrier,omitempty"`
}

type probeResponse struct {
	PID        int               `json:"pid"`
	Env        map[string]string `json:"env"`
	DeadlineMS int64             `json:"deadline_ms"`
	Started    int64             `json:"started_ns"`
	Finished   int64             `json:"finished_ns"`
}

func invoke(t *testing.T, in *rie.Instance, req probeRequest) (probeResponse, *rie.Response) {
	t.Helper()
	payload, err := json.Marshal(req)
	require.NoError(t, err)
	resp, err := in.Invoke(t.Context(), payload)
	require.NoError(t, err)
	var out probeResponse
	if resp.Err() == nil {
		require.NoError(t, json.Unmarshal(resp.Payload, &out), "%s", resp.Payload)
	}
	return out, resp
}

func TestInvoke(t *testing.T) {
	t.Setenv("AWS_LAMBDA_MAX_CONCURRENCY", "8") // from the parent: ignored
	t.Setenv("RIE_TEST_INHERITED", "parent")
	t.Setenv("RIE_TEST_OVERRIDDEN", "parent")
	in := rie.Start(t, rie.Config{
		Bootstrap:    function(t, "probe"),
		Env:          []string{"RIE_TEST_OVERRIDDEN=config", "RIE_TEST_ADDED=config"},
		Timeout:      1500 * time.Millisecond,
		FunctionName: "probe-fn",
	})
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/2015-03-31/functions/function/invocations$`, in.URL)
	require.Empty(t, in.InitReports(), "the classic mode starts the runtime on the first invocation")

	names := []string{"RIE_TEST_INHERITED", "RIE_TEST_OVERRIDDEN", "RIE_TEST_ADDED", "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_TIMEOUT", "AWS_LAMBDA_MAX_CONCURRENCY"}
	first, resp := invoke(t, in, probeRequest{Env: names})
	require.NoError(t, resp.Err())
	assert.Equal(t, map[string]string{
		"RIE_TEST_INHERITED":          "parent",
		"RIE_TEST_OVERRIDDEN":         "config",
		"RIE_TEST_ADDED":              "config",
		"AWS_LAMBDA_FUNCTION_NAME":    "probe-fn",
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "2",
		"AWS_LAMBDA_MAX_CONCURRENCY":  "",
	}, first.Env)
	assert.NotZero(t, first.DeadlineMS, "the invocation has a deadline")

	second, _ := invoke(t, in, probeRequest{})
	assert.Equal(t, first.PID, second.PID, "one runtime process serves the invocations")
	reports, err := in.WaitInitReports(t.Context(), 1)
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Positive(t, reports[0].Duration)
	assert.Contains(t, reports[0].Line, "INIT REPORT")
	assert.True(t, slices.ContainsFunc(in.Logs(), func(l string) bool { return strings.HasPrefix(l, "START RequestId: ") }))
}

func TestFunctionError(t *testing.T) {
	in := rie.Start(t, rie.Config{Bootstrap: function(t, "probe")})
	_, resp := invoke(t, in, probeRequest{Fail: "card declined"})
	var fe *rie.FunctionError
	require.ErrorAs(t, resp.Err(), &fe)
	assert.Equal(t, &rie.FunctionError{Type: "errorString", Message: "card declined"}, fe)
	_, resp = invoke(t, in, probeRequest{})
	assert.NoError(t, resp.Err(), "the environment goes on")
}

// A timed-out invocation is killed with its runtime process; the next
// invocation starts a new one.
func TestTimeout(t *testing.T) {
	in := rie.Start(t, rie.Config{Bootstrap: function(t, "probe"), Timeout: time.Second})
	before, _ := invoke(t, in, probeRequest{})
	_, resp := invoke(t, in, probeRequest{SleepMS: 60_000})
	var fe *rie.FunctionError
	require.ErrorAs(t, resp.Err(), &fe)
	assert.Equal(t, rie.TimeoutType, fe.Type)
	assert.Equal(t, "Task timed out after 1.00 seconds", fe.Message)
	waitGone(t, before.PID)

	after, resp := invoke(t, in, probeRequest{})
	require.NoError(t, resp.Err())
	assert.NotEqual(t, before.PID, after.PID, "a new runtime process")
	reports, err := in.WaitInitReports(t.Context(), 2)
	require.NoError(t, err, "a new init")
	assert.Len(t, reports, 2)
}

// waitGone waits until process pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The classic mode runs one invocation at a time (the emulator crashes on
// a second one): Invoke queues them.
func TestClassicModeQueues(t *testing.T) {
	in := rie.Start(t, rie.Config{Bootstrap: function(t, "probe")})
	var wg sync.WaitGroup
	results := make([]probeResponse, 4)
	for i := range results {
		wg.Go(func() {
			payload, _ := json.Marshal(probeRequest{SleepMS: 50})
			resp, err := in.Invoke(t.Context(), payload)
			if assert.NoError(t, err) && assert.NoError(t, resp.Err()) {
				assert.NoError(t, json.Unmarshal(resp.Payload, &results[i]))
			}
		})
	}
	wg.Wait()
	slices.SortFunc(results, func(a, b probeResponse) int { return int(a.Started - b.Started) })
	for i := 1; i < len(results); i++ {
		assert.GreaterOrEqual(t, results[i].Started, results[i-1].Finished, "invocations do not overlap")
		assert.Equal(t, results[0].PID, results[i].PID)
	}
}

// In the multi-concurrency mode, one runtime process runs MaxConcurrency
// invocations at once: the barrier only opens when four have arrived. The
// invocations beyond that wait (the emulator refuses them and Invoke
// retries).
func TestMultiConcurrency(t *testing.T) {
	in := rie.Start(t, rie.Config{Bootstrap: function(t, "probe"), MaxConcurrency: 4, Timeout: 20 * time.Second})
	var wg sync.WaitGroup
	results := make([]probeResponse, 8)
	for i := range results {
		req := probeRequest{Env: []string{"AWS_LAMBDA_MAX_CONCURRENCY"}}
		if i < 4 {
			req.Barrier = 4
		}
		wg.Go(func() {
			payload, _ := json.Marshal(req)
			resp, err := in.Invoke(t.Context(), payload)
			if assert.NoError(t, err) && assert.NoError(t, resp.Err()) {
				assert.NoError(t, json.Unmarshal(resp.Payload, &results[i]))
			}
		})
		if i == 3 {
			wg.Wait() // the barrier's group first
		}
	}
	wg.Wait()
	for _, r := range results {
		assert.Equal(t, results[0].PID, r.PID, "one runtime process")
		assert.Equal(t, "4", r.Env["AWS_LAMBDA_MAX_CONCURRENCY"])
	}
}

func TestMultiConcurrencyTimeout(t *testing.T) {
	in := rie.Start(t, rie.Config{Bootstrap: function(t, "probe"), MaxConcurrency: 2, Timeout: time.Second})
	_, resp := invoke(t, in, probeRequest{SleepMS: 3000})
	var fe *rie.FunctionError
	require.ErrorAs(t, resp.Err(), &fe)
	assert.Equal(t, rie.TimeoutType, fe.Type)
}

// Stop ends the emulator and the runtime process, which runs in a process
// group of its own, even in the middle of an invocation.
func TestStopEndsTheRuntime(t *testing.T) {
	for name, concurrency := range map[string]int{"classic": 1, "multi-concurrency": 2} {
		t.Run(name, func(t *testing.T) {
			in := rie.Start(t, rie.Config{Bootstrap: function(t, "probe"), MaxConcurrency: concurrency})
			_, resp := invoke(t, in, probeRequest{})
			require.NoError(t, resp.Err())
			// The runtime's PID as it sees it is of no use here (the
			// multi-concurrency mode runs in a PID namespace): find the
			// processes from /proc.
			pids := processTree(t, in)
			require.NotEmpty(t, pids)

			type ended struct {
				err    error
				answer []byte
			}
			running := make(chan ended, 1)
			go func() {
				payload, _ := json.Marshal(probeRequest{SleepMS: 60_000})
				resp, err := in.Invoke(context.Background(), payload)
				var answer []byte
				if err == nil {
					// The emulator may answer as it shuts down, with an
					// error or an answer of its own.
					err, answer = resp.Err(), resp.Payload
				}
				running <- ended{err, answer}
			}()
			time.Sleep(100 * time.Millisecond) // most likely running by now; either way it must end
			require.NoError(t, in.Stop())
			require.NoError(t, in.Stop(), "Stop twice")
			for _, pid := range pids {
				waitGone(t, pid)
			}
			select {
			case e := <-running:
				// Never the function's answer, which takes a minute.
				var r probeResponse
				if e.err == nil && json.Unmarshal(e.answer, &r) == nil && r.Finished != 0 {
					t.Errorf("the invocation ended with the function's answer: %s", e.answer)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the invocation did not end")
			}
			_, err := in.Invoke(t.Context(), []byte(`{}`))
			assert.Error(t, err)
			_, err = http.Post(in.URL, "application/json", strings.NewReader("{}"))
			assert.Error(t, err, "nothing listens any more")
		})
	}
}

// processTree returns the instance's process and its descendants, whatever
// their process groups.
func processTree(t *testing.T, in *rie.Instance) []int {
	t.Helper()
	root := in.PID()
	children := map[int][]int{}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may contain spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		var ppid int
		if len(fields) > 1 {
			fmt.Sscan(fields[1], &ppid)
		}
		children[ppid] = append(children[ppid], pid)
	}
	var tree []int
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		tree = append(tree, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return tree
}

// Several instances run side by side, each with ports of its own.
func TestInstancesAreIndependent(t *testing.T) {
	a := rie.Start(t, rie.Config{Bootstrap: function(t, "probe")})
	b := rie.Start(t, rie.Config{Bootstrap: function(t, "probe")})
	require.NotEqual(t, a.URL, b.URL)
	ra, _ := invoke(t, a, probeRequest{})
	rb, _ := invoke(t, b, probeRequest{})
	assert.NotEqual(t, ra.PID, rb.PID)
}

func TestStartErrors(t *testing.T) {
	_, err := rie.StartContext(t.Context(), rie.Config{})
	require.Error(t, err)
	_, err = rie.StartContext(t.Context(), rie.Config{Bootstrap: filepath.Join(t.TempDir(), "missing")})
	require.Error(t, err)
	assert.False(t, errors.Is(err, rie.ErrUnavailable), "a missing function is the caller's mistake")
}

func TestResponseErr(t *testing.T) {
	for name, tc := range map[string]struct {
		resp rie.Response
		want error
	}{
		"response": {rie.Response{StatusCode: 200, Payload: []byte(`{"statusCode":201,"body":"{}"}`)}, nil},
		"string":   {rie.Response{StatusCode: 200, Payload: []byte(`"hello"`)}, nil},
		"error member in a response": {
			rie.Response{StatusCode: 200, Payload: []byte(`{"body":"{\"errorType\":\"x\"}"}`)}, nil,
		},
		"function error": {
			rie.Response{StatusCode: 200, Payload: []byte(`{"errorMessage":"boom","errorType":"errorString"}`)},
			&rie.FunctionError{Type: "errorString", Message: "boom"},
		},
		"classic timeout": {
			rie.Response{StatusCode: 200, Payload: []byte(`Task timed out after 3.00 seconds`)},
			&rie.FunctionError{Type: rie.TimeoutType, Message: "Task timed out after 3.00 seconds"},
		},
		"multi-concurrency timeout": {
			rie.Response{StatusCode: 200, Header: http.Header{"Error-Type": {"Sandbox.Timedout"}},
				Payload: []byte(`{"errorType":"Sandbox.Timedout","errorMessage":"Task timed out after 2.00 seconds"}`)},
			&rie.FunctionError{Type: rie.TimeoutType, Message: "Task timed out after 2.00 seconds"},
		},
		"emulator error": {
			rie.Response{StatusCode: 502, Header: http.Header{"Error-Type": {"Runtime.ExitError"}}, Payload: []byte(`{}`)},
			&rie.FunctionError{Type: "Runtime.ExitError", Message: "emulator status 502: {}"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.resp.Header == nil {
				tc.resp.Header = http.Header{}
			}
			assert.Equal(t, tc.want, tc.resp.Err())
		})
	}
}
