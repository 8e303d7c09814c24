package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrysafe/retrysafe/internal/epoch"
	"github.com/retrysafe/retrysafe/persistence"
)

// guardField is the hash field the scripts delete to make a read-only
// replica refuse them (see scripts.go). No record has it.
const guardField = "retrysafe:primary-check"

// Fields names the fields of the hash that holds a record. An empty name
// takes its default, given with each field. The defaults of the first
// five are the attribute names of the Powertools DynamoDB and Redis
// layers.
type Fields struct {
	// Status holds the record's status, INPROGRESS or COMPLETED. Default
	// "status".
	Status string
	// Expiration holds ExpiresAt in epoch seconds. Default "expiration".
	Expiration string
	// InProgressExpiration holds InProgressExpiresAt in epoch milliseconds;
	// absent when there is none. Default "in_progress_expiration".
	InProgressExpiration string
	// Validation holds the payload hash; absent when empty. Default
	// "validation".
	Validation string
	// Data holds the response bytes, as they are; absent when empty.
	// Default "data".
	Data string
	// Token holds the token of the invocation that wrote the record.
	// Default "owner_token".
	Token string
	// ErrorType and ErrorMessage hold a recorded handler error; absent when
	// empty. Defaults "error_type" and "error_message".
	ErrorType    string
	ErrorMessage string
	// ResponseOmitted is "1" when the response was too large to keep; absent
	// otherwise. Default "response_omitted".
	ResponseOmitted string
	// Held is "1" on a reservation that keeps its key when it lapses
	// (persistence.Record.Held); absent otherwise. Default "held".
	Held string
}

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// KeyPrefix is prepended to each record's key to make its Redis key.
	// For example, "idempotency:" keeps the records apart from other data in a
	// shared database. Empty by default.
	//
	// With Redis Cluster, the Redis key decides the slot. Do not put a hash
	// tag ("{...}") in the prefix unless you want every record on one shard.
	KeyPrefix string

	// Fields names the hash fields; see Fields for the defaults.
	Fields Fields

	// MaxResponseSize, when positive, is the largest response the store
	// keeps. Update completes a record with a larger response without it. It
	// then returns [persistence.ErrResponseOmitted], as a store with an item
	// size limit must. Zero, the default, keeps every response. A Redis string
	// holds up to 512 MB, far more than a Lambda response (6 MB). So there is
	// no limit to work around.
	MaxResponseSize int

	// WaitReplicas, when positive, makes every write wait until at least that
	// many replicas have acknowledged it. The writes are Put that reserves,
	// Update and Delete. The WAIT command is sent in the same round trip as
	// the write. A failover to one of those replicas then keeps the record. A
	// write that fewer replicas acknowledge within WaitTimeout fails with an
	// error that wraps [ErrNotReplicated]. It has been applied on the primary.
	// Zero, the default, does not wait. Replication is then asynchronous (see
	// the package documentation, Durability).
	//
	// While fewer replicas are connected, every write fails. One may be down,
	// or a failover may have promoted one and no other has taken its place.
	// Set WaitReplicas below the number of replicas to keep serving with one
	// gone.
	//
	// It needs a *redis.Client (one primary, or Sentinel) or a
	// *redis.ClusterClient. Their commands for one key can be sent on one
	// connection. That matters, since WAIT counts the writes of the connection
	// it is sent on.
	WaitReplicas int

	// WaitTimeout bounds the wait for WaitReplicas, and is shortened to the
	// context's deadline. It must be shorter than the client's ReadTimeout,
	// which bounds the whole round trip. Zero means one second.
	WaitTimeout time.Duration
}

// defaultWaitTimeout is Options.WaitTimeout's default: replicas on the same
// network acknowledge in well under a millisecond, so a second is ample, and
// a Lambda invocation can afford it when a replica is gone.
const defaultWaitTimeout = time.Second

// Store is a persistence.Store backed by Redis or Valkey. It is safe for
// concurrent use. Create one with New.
type Store struct {
	client redis.UniversalClient
	prefix string
	fields Fields
	max    int
	wait   replicaWait
	// watches are the subscriptions of waiting calls (notify.go).
	watches watches
}

var (
	_ persistence.Store    = (*Store)(nil)
	_ persistence.Admin    = (*Store)(nil)
	_ persistence.Notifier = (*Store)(nil)
)

// New returns a Store that keeps records through client. The client is a
// *redis.Client (single node, or Sentinel with redis.NewFailoverClient), a
// *redis.ClusterClient, or any other redis.UniversalClient. The Store does
// not take ownership of client. Close it yourself when you are done.
//
// New makes no request. It returns an error when client is nil or the
// options are invalid. Invalid options are a negative MaxResponseSize,
// field names that clash, or a WaitReplicas that the client cannot honour
// (see [Options]).
func New(client redis.UniversalClient, optFns ...func(*Options)) (*Store, error) {
	if client == nil {
		return nil, errors.New("persistence/redis: New: nil client")
	}
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	if o.MaxResponseSize < 0 {
		return nil, fmt.Errorf("persistence/redis: New: negative MaxResponseSize %d", o.MaxResponseSize)
	}
	f, err := o.Fields.resolve()
	if err != nil {
		return nil, err
	}
	wait, err := newReplicaWait(client, o.WaitReplicas, o.WaitTimeout)
	if err != nil {
		return nil, err
	}
	return &Store{client: client, prefix: o.KeyPrefix, fields: f, max: o.MaxResponseSize, wait: wait,
		watches: watches{client: client}}, nil
}

// resolve returns f with defaults for its empty names, or an error when two
// names are the same or one is reserved.
func (f Fields) resolve() (Fields, error) {
	seen := make(map[string]string)
	for _, field := range []struct {
		name string
		p    *string
		def  string
	}{
		{"Status", &f.Status, "status"},
		{"Expiration", &f.Expiration, "expiration"},
		{"InProgressExpiration", &f.InProgressExpiration, "in_progress_expiration"},
		{"Validation", &f.Validation, "validation"},
		{"Data", &f.Data, "data"},
		{"Token", &f.Token, "owner_token"},
		{"ErrorType", &f.ErrorType, "error_type"},
		{"ErrorMessage", &f.ErrorMessage, "error_message"},
		{"ResponseOmitted", &f.ResponseOmitted, "response_omitted"},
		{"Held", &f.Held, "held"},
	} {
		if *field.p == "" {
			*field.p = field.def
		}
		if *field.p == guardField {
			return f, fmt.Errorf("persistence/redis: New: field name %q of Fields.%s is reserved", guardField, field.name)
		}
		if other, ok := seen[*field.p]; ok {
			return f, fmt.Errorf("persistence/redis: New: Fields.%s and Fields.%s are both %q", other, field.name, *field.p)
		}
		seen[*field.p] = field.name
	}
	return f, nil
}

// RedisKey returns the Redis key that holds the record for key: the key
// prefix followed by key.
func (s *Store) RedisKey(key string) string { return s.prefix + key }

// Put implements [persistence.Store]. It reserves rec.Key with one script
// run. It writes rec when the key is free, or holds a record that is not
// live at now. It then sets the key to expire at rec.ExpiresAt. Otherwise
// it writes nothing and returns a [*persistence.ConflictError]. Its
// Existing is the record that holds the key, read in the same step.
//
// Other errors are returned wrapped, never as a conflict. They are network
// errors, timeouts, READONLY from a replica, and a key that holds something
// other than a record. A Put that failed may still have been applied by
// the server, when its reply was lost. The key then holds rec, with
// rec.Token, until its in-progress expiry or a Delete with that token.
func (s *Store) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	args := make([]any, 0, 10+18)
	args = append(args,
		guardField,
		strconv.FormatInt(epoch.CeilMillis(now), 10),
		rec.ExpiresAt.UnixMilli(),
		string(persistence.StatusInProgress),
		s.fields.Status, s.fields.Expiration, s.fields.InProgressExpiration,
		s.fields.Token, rec.Token,
		s.fields.Held,
	)
	args = append(args, s.fields.encode(rec, rec.Response, rec.ResponseOmitted)...)
	reply, acks, err := s.runScript(ctx, putScript, rec.Key, args...)
	if err != nil {
		return s.opError("put", rec.Key, err)
	}
	switch reply := reply.(type) {
	case int64:
		if reply == 1 {
			return s.replicated("put", rec.Key, acks)
		}
	case []any:
		existing, err := s.fields.decode(rec.Key, reply)
		if err != nil {
			return s.opError("put", rec.Key, err)
		}
		if existing.Token == rec.Token {
			// The caller's own reservation, from an attempt whose reply
			// was lost (go-redis retries): the script wrote to it again,
			// so that WAIT tells whether it is replicated.
			if err := s.replicated("put", rec.Key, acks); err != nil {
				return err
			}
		}
		return &persistence.ConflictError{Existing: existing}
	}
	return s.opError("put", rec.Key, fmt.Errorf("unexpected script reply %#v", reply))
}

// Get implements persistence.Store. It reads the record with one script run,
// which go-redis sends to the primary even when the client routes read-only
// commands to replicas. It returns persistence.ErrNotFound when there is no
// record, including once Redis has evicted it at its ExpiresAt.
func (s *Store) Get(ctx context.Context, key string) (*persistence.Record, error) {
	reply, err := getScript.Run(ctx, s.client, []string{s.RedisKey(key)}, guardField).Result()
	if err != nil {
		return nil, s.opError("get", key, err)
	}
	fields, ok := reply.([]any)
	if !ok {
		return nil, s.opError("get", key, fmt.Errorf("unexpected script reply %#v", reply))
	}
	if len(fields) == 0 {
		return nil, persistence.ErrNotFound
	}
	rec, err := s.fields.decode(key, fields)
	if err != nil {
		return nil, s.opError("get", key, err)
	}
	return rec, nil
}

// Update implements [persistence.Store]. With one script run, it replaces
// the record if it is the caller's own reservation (rec.Token, in
// progress). It then sets the key to expire at rec.ExpiresAt. A completion
// that finds the caller's own completed record writes nothing and
// succeeds. Otherwise it writes nothing and returns [persistence.ErrFenced].
// It does so too when there is no record, which may have been evicted at
// its ExpiresAt.
//
// When [Options.MaxResponseSize] is set and rec.Response is larger, the
// record is written without its response, with ResponseOmitted set. Update
// then returns [persistence.ErrResponseOmitted].
func (s *Store) Update(ctx context.Context, rec *persistence.Record) error {
	response, omitted := rec.Response, rec.ResponseOmitted
	tooLarge := s.max > 0 && len(response) > s.max
	if tooLarge {
		response, omitted = nil, true
	}
	completes, renewsTo := "", ""
	if rec.Status == persistence.StatusCompleted {
		completes = string(persistence.StatusCompleted)
	} else if !rec.InProgressExpiresAt.IsZero() {
		renewsTo = strconv.FormatInt(rec.InProgressExpiresAt.UnixMilli(), 10)
	}
	args := make([]any, 0, 9+18)
	args = append(args, guardField, rec.Token, s.fields.Token, s.fields.Status,
		string(persistence.StatusInProgress), completes, rec.ExpiresAt.UnixMilli(),
		s.fields.InProgressExpiration, renewsTo)
	args = append(args, s.fields.encode(rec, response, omitted)...)
	reply, acks, err := s.runScript(ctx, updateScript, rec.Key, args...)
	if err != nil {
		return s.opError("update", rec.Key, err)
	}
	switch reply {
	case int64(1), int64(2), int64(3):
		// 2: the caller's completion was there already; 3: a later
		// renewal was (done).
		if err := s.replicated("update", rec.Key, acks); err != nil {
			return err
		}
		if tooLarge {
			return persistence.ErrResponseOmitted
		}
		return nil
	case int64(0), int64(-1), int64(-2):
		return persistence.ErrFenced
	}
	return s.opError("update", rec.Key, fmt.Errorf("unexpected script reply %#v", reply))
}

// Delete implements [persistence.Store]. With one script run, it deletes
// the record if it is the caller's own reservation (token, in progress).
// It succeeds when there is none. It returns [persistence.ErrFenced]
// otherwise.
func (s *Store) Delete(ctx context.Context, key, token string) error {
	reply, acks, err := s.runScript(ctx, deleteScript, key, guardField, token, s.fields.Token,
		s.fields.Status, string(persistence.StatusInProgress))
	if err != nil {
		return s.opError("delete", key, err)
	}
	switch reply {
	case int64(1):
		return s.replicated("delete", key, acks)
	case int64(0):
		return nil
	case int64(-1), int64(-2):
		return persistence.ErrFenced
	}
	return s.opError("delete", key, fmt.Errorf("unexpected script reply %#v", reply))
}

// opError wraps an error of operation op on key. The result wraps err, so
// errors.Is and errors.As see the cause (context.DeadlineExceeded, a
// *net.OpError, a redis.Error such as READONLY).
func (s *Store) opError(op, key string, err error) error {
	return fmt.Errorf("persistence/redis: %s %q: %w", op, key, err)
}
