// Package runs counts the runs of the test services' handlers, which the
// gRPC and Connect tests share: the side effect that must happen once per
// key.
package runs

import (
	"context"
	"sync"
)

// Counter counts runs by key. Its zero value is ready to use. A test sets
// Hold, Entered and Before before its first call, to see and steer the
// handlers that call Wait.
type Counter struct {
	// Hold, when not nil, is received from before Wait returns, and
	// Entered is sent to when it starts.
	Hold    chan struct{}
	Entered chan struct{}
	// Before runs first in Wait, when set.
	Before func(ctx context.Context)

	mu   sync.Mutex
	runs map[string]int // guarded by mu
}

// Run counts a run of key and returns its number.
func (c *Counter) Run(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[key]++
	return c.runs[key]
}

// Runs returns how often key ran.
func (c *Counter) Runs(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[key]
}

// Total returns how many runs there were, all keys together.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.runs {
		n += r
	}
	return n
}

// Wait is what a handler does first: Before, then Entered and Hold.
func (c *Counter) Wait(ctx context.Context) {
	if c.Before != nil {
		c.Before(ctx)
	}
	if c.Entered != nil {
		c.Entered <- struct{}{}
	}
	if c.Hold != nil {
		<-c.Hold
	}
}
