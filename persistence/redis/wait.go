package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is wrapped by the error of a write that fewer replicas
// than Options.WaitReplicas acknowledged within Options.WaitTimeout. The
// write has been applied on the primary; a failover before the replicas
// catch up can lose it.
var ErrNotReplicated = errors.New("write not replicated")

// replicaWait sends WAIT after the writes of a Store with
// Options.WaitReplicas set.
type replicaWait struct {
	replicas int // 0: do not wait
	timeout  time.Duration
	// primary returns a client whose connections go to the primary that
	// owns key, so that a pipeline of the script and WAIT runs on one
	// connection.
	primary func(ctx context.Context, key string) (*redis.Client, error)
	// cluster is the cluster client, whose slot map is reloaded when a
	// node answers that it does not own the key.
	cluster *redis.ClusterClient
}

// newReplicaWait checks Options.WaitReplicas and WaitTimeout against
// client.
func newReplicaWait(client redis.UniversalClient, replicas int, timeout time.Duration) (replicaWait, error) {
	switch {
	case replicas < 0:
		return replicaWait{}, fmt.Errorf("persistence/redis: New: negative WaitReplicas %d", replicas)
	case timeout < 0:
		return replicaWait{}, fmt.Errorf("persistence/redis: New: negative WaitTimeout %v", timeout)
	case replicas == 0:
		return replicaWait{}, nil
	case timeout == 0:
		timeout = defaultWaitTimeout
	}
	w := replicaWait{replicas: replicas, timeout: timeout}
	var readTimeout time.Duration
	switch c := client.(type) {
	case *redis.Client:
		readTimeout = c.Options().ReadTimeout
		w.primary = func(context.Context, string) (*redis.Client, error) { return c, nil }
	case *redis.ClusterClient:
		readTimeout = c.Options().ReadTimeout
		w.primary = c.MasterForKey
		w.cluster = c
	default:
		return replicaWait{}, fmt.Errorf("persistence/redis: New: WaitReplicas needs a *redis.Client or a *redis.ClusterClient, not a %T", client)
	}
	// go-redis bounds the reply to the pipeline by ReadTimeout (zero: none).
	if readTimeout > 0 && timeout >= readTimeout {
		return replicaWait{}, fmt.Errorf("persistence/redis: New: WaitTimeout %v is not shorter than the client's ReadTimeout %v", timeout, readTimeout)
	}
	return w, nil
}

// run runs script on the primary that owns keys[0] and, in the same round
// trip and on the same connection, WAIT, whose reply it returns as acks.
// After NOSCRIPT it sends both again, with the script's text.
func (w *replicaWait) run(ctx context.Context, script *redis.Script, keys []string, args []any) (reply any, acks int, err error) {
	primary, err := w.primary(ctx, keys[0])
	if err != nil {
		return nil, 0, err
	}
	timeout := w.timeout
	if deadline, ok := ctx.Deadline(); ok {
		// WAIT 0 waits forever: never send less than a millisecond.
		timeout = max(min(timeout, time.Until(deadline)), time.Millisecond)
	}
	cmd, wait := w.send(ctx, primary, script.EvalSha, keys, args, timeout)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait = w.send(ctx, primary, script.Eval, keys, args, timeout)
	}
	if err := cmd.Err(); err != nil {
		if w.cluster != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
			// The slot has moved: the cluster client follows it on its own
			// commands, but these went to the node it named before.
			w.cluster.ReloadState(ctx)
		}
		return nil, 0, err
	}
	if err := wait.Err(); err != nil {
		return nil, 0, fmt.Errorf("WAIT: %w", err)
	}
	return cmd.Val(), int(wait.Val()), nil
}

// send sends the script, with eval (its EvalSha or Eval), and WAIT as one
// pipeline, and returns their commands, which hold the replies or errors.
func (w *replicaWait) send(ctx context.Context, primary *redis.Client, eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd,
	keys []string, args []any, timeout time.Duration) (*redis.Cmd, *redis.IntCmd) {
	pipe := primary.Pipeline()
	cmd := eval(ctx, pipe, keys, args...)
	// (Pipeliner has no Wait method.)
	wait := redis.NewIntCmd(ctx, "wait", w.replicas, timeout.Milliseconds())
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx) // the errors are the commands' own
	return cmd, wait
}

// runScript runs script on the record key's Redis key: with WaitReplicas,
// followed by WAIT (acks is then its reply; otherwise it is 0).
func (s *Store) runScript(ctx context.Context, script *redis.Script, key string, args ...any) (reply any, acks int, err error) {
	keys := []string{s.RedisKey(key)}
	if s.wait.replicas == 0 {
		reply, err = script.Run(ctx, s.client, keys, args...).Result()
		return reply, 0, err
	}
	return s.wait.run(ctx, script, keys, args)
}

// replicated returns nil when a write that acks replicas acknowledged is
// replicated as Options.WaitReplicas asks, and otherwise an error of
// operation op on key that wraps ErrNotReplicated.
func (s *Store) replicated(op, key string, acks int) error {
	if acks >= s.wait.replicas {
		return nil
	}
	return s.opError(op, key, fmt.Errorf("applied on the primary, but acknowledged by %d of %d replicas: %w", acks, s.wait.replicas, ErrNotReplicated))
}
