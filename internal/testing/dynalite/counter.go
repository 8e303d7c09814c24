package dynalite

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// Counter is an SDK middleware that counts the DynamoDB operations a client
// performs, by operation name ("PutItem", "GetItem", ...): calls (one per
// API call, however often the SDK retries it) and attempts (one per HTTP
// request sent, retries included). The zero value is ready to use, and a
// Counter is safe for concurrent use; one Counter may count for several
// clients.
//
//	var c dynalite.Counter
//	client := srv.NewClient(c.Register)
type Counter struct {
	mu       sync.Mutex
	calls    map[string]int
	attempts map[string]int
}

// Register installs the counter on a client. Pass it as an option to
// dynamodb.New, dynamodb.NewFromConfig or Server.NewClient, or to a single
// call.
func (c *Counter) Register(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, c.addToStack)
}

func (c *Counter) addToStack(stack *middleware.Stack) error {
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("retrysafe.CountCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.add(&c.calls, awsmiddleware.GetOperationName(ctx))
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	if err != nil {
		return err
	}
	// After the retry middleware, so once per attempt.
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("retrysafe.CountAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.add(&c.attempts, awsmiddleware.GetOperationName(ctx))
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

func (c *Counter) add(m *map[string]int, op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = make(map[string]int)
	}
	(*m)[op]++
}

// Calls returns the number of calls of the named operations since the last
// Reset, or of all operations when no name is given.
func (c *Counter) Calls(ops ...string) int { return c.sum(c.calls, ops) }

// Attempts returns the number of HTTP requests sent for the named
// operations since the last Reset, retries included, or for all operations
// when no name is given.
func (c *Counter) Attempts(ops ...string) int { return c.sum(c.attempts, ops) }

func (c *Counter) sum(m map[string]int, ops []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	if len(ops) == 0 {
		for _, v := range m {
			n += v
		}
		return n
	}
	for _, op := range ops {
		n += m[op]
	}
	return n
}

// Snapshot returns the calls per operation since the last Reset.
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// Reset sets every count back to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls, c.attempts = nil, nil
}

// String lists the calls per operation, such as "GetItem=1 PutItem=1", for
// test failure messages.
func (c *Counter) String() string {
	snap := c.Snapshot()
	var b strings.Builder
	for _, op := range slices.Sorted(maps.Keys(snap)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", op, snap[op])
	}
	if b.Len() == 0 {
		return "no calls"
	}
	return b.String()
}
