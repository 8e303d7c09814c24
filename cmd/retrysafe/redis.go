package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// quiet is go-redis's logger: its messages (a failed dial, retried) would
// interleave with the command's, which reports the failure itself.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// openRedis connects to the URL of the flags, a cluster's with --cluster,
// and checks that the server answers.
func openRedis(ctx context.Context, f *storeFlags) (*store, error) {
	for i, a := range attrNames {
		if a.redis == nil && f.attrs[i] != "" {
			return nil, usageError("--%s is for DynamoDB; a Redis URL is Redis", a.flag)
		}
	}
	redis.SetLogger(quiet{})
	var (
		client redis.UniversalClient
		name   string
	)
	if f.cluster {
		opts, err := redis.ParseClusterURL(f.redisURL)
		if err != nil {
			return nil, usageError("--redis %q: %v", f.redisURL, err)
		}
		opts.ContextTimeoutEnabled = true
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = f.requestTimeout, f.requestTimeout, f.requestTimeout
		client, name = redis.NewClusterClient(opts), "Redis cluster at "+strings.Join(opts.Addrs, ",")
	} else {
		opts, err := redis.ParseURL(f.redisURL)
		if err != nil {
			return nil, usageError("--redis %q: %v", f.redisURL, err)
		}
		opts.ContextTimeoutEnabled = true
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = f.requestTimeout, f.requestTimeout, f.requestTimeout
		client, name = redis.NewClient(opts), "Redis at "+opts.Addr
	}
	fields := redisstore.Fields{}
	for i, a := range attrNames {
		if a.redis != nil {
			*a.redis(&fields) = f.attrs[i]
		}
	}
	s, err := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix, o.Fields = f.redisPrefix, fields })
	if err != nil {
		_ = client.Close()
		return nil, usageError("%v", strings.TrimPrefix(err.Error(), "persistence/redis: New: "))
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		if t := timedOut(ctx, name, err, f.requestTimeout, f.timeout); t != nil {
			return nil, t
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &store{
		name:           name,
		requestTimeout: f.requestTimeout,
		timeout:        f.timeout,
		records:        s,
		selfSweeping:   func(context.Context) (string, error) { return "Redis deletes each record itself at its expiry", nil },
		explain:        func(err error) error { return explainRedis(name, err) },
		close:          client.Close,
	}, nil
}

// explainRedis adds the server to an error, and what it means when it is
// neither the network's nor the server's: a hash that does not decode as
// a record, whose fields are named otherwise.
func explainRedis(name string, err error) error {
	var (
		netErr   net.Error
		redisErr redis.Error
	)
	if errors.As(err, &netErr) || errors.As(err, &redisErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return fmt.Errorf("%s: %w; %s", name, err, attrHint)
}
