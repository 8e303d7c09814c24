// Command probe is a Lambda function that reports on the environment it
// runs in, for the tests of package rie.
package main

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

type request struct {
	SleepMS int      `json:"sleep_ms"`
	Fail    string   `json:"fail"`
	Env     []string `json:"env"`
	// Barrier makes the invocation wait until this many invocations have
	// arrived in this process, so that they all run at once.
	Barrier int `json:"barrier"`
}

type response struct {
	PID        int               `json:"pid"`
	Env        map[string]string `json:"env"`
	DeadlineMS int64             `json:"deadline_ms"`
	Started    int64             `json:"started_ns"`
	Finished   int64             `json:"finished_ns"`
}

func handle(ctx context.Context, req request) (response, error) {
	resp := response{PID: os.Getpid(), Env: map[string]string{}, Started: time.Now().UnixNano()}
	if d, ok := ctx.Deadline(); ok {
		resp.DeadlineMS = d.UnixMilli()
	}
	for _, name := range req.Env {
		resp.Env[name] = os.Getenv(name)
	}
	if req.Barrier > 0 {
		if err := arrive(ctx, req.Barrier); err != nil {
			return resp, err
		}
	}
	if req.Fail != "" {
		return resp, errors.New(req.Fail)
	}
	time.Sleep(time.Duration(req.SleepMS) * time.Millisecond)
	resp.Finished = time.Now().UnixNano()
	return resp, nil
}

var (
	mu       sync.Mutex
	arrived  int
	released = make(chan struct{})
)

// arrive counts the invocation and waits until n invocations have arrived
// in this process: they then all run at once. One group per process.
func arrive(ctx context.Context, n int) error {
	mu.Lock()
	arrived++
	if arrived == n {
		close(released)
	}
	mu.Unlock()
	select {
	case <-released:
		return nil
	case <-ctx.Done():
		return errors.New("barrier not reached")
	}
}

func main() { lambda.Start(handle) }
