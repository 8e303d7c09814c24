package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/retrysafe/retrysafe/persistence"
)

// List implements [persistence.Admin]. It reads the store's records a page
// at a time, for operators' tools.
//
// It scans the keys that start with [Options.KeyPrefix] followed by
// keyPrefix. It uses SCAN with MATCH and TYPE hash, asking for pageSize
// keys a call. A pageSize of 0 is Redis's default of 10. It scans every
// primary of a cluster in turn, and reads each page's hashes in one
// pipeline. Hashes that are not records (other data under the prefix) are
// skipped, and so are records deleted between the scan and the read. As
// SCAN does, List may return a record more than once when the server
// resizes its tables meanwhile.
//
// The records come without their responses. The reads leave them out so
// that listing does not transfer them. [Store.Get] reads a whole record.
// Reads go to each shard's primary, as every operation of the store does
// with a client that does not route reads to replicas.
func (s *Store) List(ctx context.Context, keyPrefix string, pageSize int, page func([]*persistence.Record) error) error {
	if pageSize < 0 {
		return fmt.Errorf("persistence/redis: List: negative page size %d", pageSize)
	}
	nodes, err := s.primaries(ctx)
	if err != nil {
		return fmt.Errorf("persistence/redis: List: %w", err)
	}
	match := globEscape(s.prefix+keyPrefix) + "*"
	for _, node := range nodes {
		var cursor uint64
		for {
			keys, next, err := node.ScanType(ctx, cursor, match, int64(pageSize), "hash").Result()
			if err != nil {
				return fmt.Errorf("persistence/redis: List: scan: %w", err)
			}
			recs, err := s.read(ctx, node, keys)
			if err != nil {
				return err
			}
			if err := page(recs); err != nil {
				return err
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return nil
}

// listedFields are the fields List reads: every field of a record but
// the response.
func (f *Fields) listedFields() []string {
	return []string{f.Status, f.Expiration, f.InProgressExpiration, f.Validation, f.Token, f.ErrorType, f.ErrorMessage, f.ResponseOmitted, f.Held}
}

// read returns the records held by the hashes at keys, on node, with one
// pipeline of HMGET.
func (s *Store) read(ctx context.Context, node redis.Cmdable, keys []string) ([]*persistence.Record, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	fields := s.fields.listedFields()
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, k, fields...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persistence/redis: List: read: %w", err)
	}
	recs := make([]*persistence.Record, 0, len(keys))
	for i, cmd := range cmds {
		key, ok := strings.CutPrefix(keys[i], s.prefix)
		if !ok {
			continue
		}
		reply := make([]any, 0, 2*len(fields))
		for j, v := range cmd.Val() {
			if v != nil {
				reply = append(reply, fields[j], v)
			}
		}
		rec, err := s.fields.decode(key, reply)
		if err != nil {
			continue // not a record, or deleted since the scan
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// primaries returns the clients of the nodes that hold the store's keys:
// each primary of a cluster, each shard of a ring, or the client itself.
func (s *Store) primaries(ctx context.Context) ([]redis.Cmdable, error) {
	var (
		mu    sync.Mutex
		nodes []redis.Cmdable
	)
	add := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, c)
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		// ForEachMaster calls add concurrently; the scans then run one
		// node after the other, so that page is called in turn.
		if err := c.ForEachMaster(ctx, add); err != nil {
			return nil, err
		}
	case *redis.Ring:
		if err := c.ForEachShard(ctx, add); err != nil {
			return nil, err
		}
	default:
		nodes = append(nodes, s.client)
	}
	return nodes, nil
}

// globEscape escapes the characters that SCAN's MATCH pattern treats as
// glob syntax.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
