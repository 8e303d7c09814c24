// Package redis is a [persistence.Store] backed by Redis or Valkey,
// through github.com/redis/go-redis/v9. It is for teams that already run
// ElastiCache, MemoryDB or their own Redis. Reservations take under a
// millisecond, and there is no table to create.
//
// # Client
//
// You bring the client, with its addresses, TLS, authentication, pool sizes
// and timeouts; the Store only runs commands through it. Any
// redis.UniversalClient works:
//
//	// One node, or a primary endpoint (ElastiCache without cluster mode):
//	client := redis.NewClient(&redis.Options{Addr: "primary.example:6379"})
//
//	// Sentinel: commands go to the primary Sentinel names.
//	client := redis.NewFailoverClient(&redis.FailoverOptions{
//		MasterName:    "mymaster",
//		SentinelAddrs: []string{"sentinel-1:26379", "sentinel-2:26379"},
//	})
//
//	// Cluster (ElastiCache cluster mode, MemoryDB, Valkey/Redis Cluster):
//	client := redis.NewClusterClient(&redis.ClusterOptions{
//		Addrs:     []string{"clustercfg.example:6379"},
//		TLSConfig: &tls.Config{},
//	})
//
//	store, err := redisstore.New(client, func(o *redisstore.Options) {
//		o.KeyPrefix = "idempotency:"
//	})
//
// TLS (ElastiCache in-transit encryption, MemoryDB) is set on the client's
// TLSConfig. AUTH or ACL credentials go in its Username and Password. IAM
// authentication tokens go in a CredentialsProvider.
//
// Set ContextTimeoutEnabled on the client. Without it, go-redis ignores the
// deadline of the context a call passes (on Lambda, the invocation
// deadline). It then waits for an unresponsive server for its ReadTimeout
// (5 seconds by default), once per retry. Keep ReadTimeout and WriteTimeout short as well
// (a reservation takes well under a millisecond):
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "primary.example:6379",
//		ContextTimeoutEnabled: true,
//		ReadTimeout:           time.Second,
//		WriteTimeout:          time.Second,
//	})
//
// Every operation is a Lua script that touches one key. go-redis sends
// scripts to the primary that owns the key. It does so even when a cluster
// client has ReadOnly, RouteByLatency or RouteRandomly set. So reads are
// always strongly consistent. A Store pointed at a replica (a reader
// endpoint) fails every operation with a READONLY error, reads included.
// It does not answer from a copy that may lag.
//
// # Key layout
//
// One record is one Redis key, holding a hash. The key is
// [Options.KeyPrefix] followed by the record's key (see [Store.RedisKey]).
// No script touches more than that one key, so the store works on Redis
// Cluster unchanged. The hash's fields are readable with redis-cli
// HGETALL:
//
//	status                  INPROGRESS or COMPLETED
//	expiration              ExpiresAt, epoch seconds
//	in_progress_expiration  InProgressExpiresAt, epoch milliseconds (absent if none)
//	validation              the payload hash (absent if empty)
//	data                    the response bytes, unchanged (absent if empty)
//	owner_token             the token of the invocation that wrote the record
//	error_type              a recorded handler error's type (absent if none)
//	error_message           a recorded handler error's message (absent if none)
//	response_omitted        "1" when the response was too large to keep (see Options.MaxResponseSize)
//	held                    "1" on a reservation that keeps its key when it lapses (absent otherwise)
//
// The first five are the Powertools attribute names. [Options.Fields]
// renames any of them.
//
// # Operators' tools
//
// [Store.List] reads the records page by page (SCAN on every primary).
// [Store.DeleteRecord] deletes a record only if it is still the one read.
// The retrysafe command is built on them.
//
// # Expiry
//
// The store's scripts decide whether a record still holds its key. They
// use the time the caller passes to Put, exactly as
// [persistence.Record.Live] decides it. They never use the Redis server's
// clock. Redis takes part only in cleaning up. Put and Update set the key's
// expiry (PEXPIREAT) to the record's ExpiresAt. So Redis deletes records
// the library no longer needs. The two agree when the clocks of the
// callers and of Redis agree. A Redis clock that runs ahead deletes
// records that much early, as if their expiry were shorter. A record whose
// expiry passes while its invocation still runs is deleted too. That
// invocation's Update then returns [persistence.ErrFenced]. So keep the
// record expiry longer than the longest invocation. The default hour is
// four times Lambda's limit.
//
// # Round trips
//
// Put, Get, Update and Delete cost one round trip each (EVALSHA). So a
// first call through the idempotency package costs two (reserve,
// complete). A replay costs one, since the reservation that fails returns
// the existing record with it.
//
// The server may lose its script cache. A restart does it, and so do a
// failover to a node that never ran the script, and SCRIPT FLUSH. The
// first run of each script then costs one more round trip. EVALSHA answers
// NOSCRIPT, and go-redis sends the script itself with EVAL, which caches
// it again. With [Options.WaitReplicas], the writes are sent as a pipeline
// of the script and WAIT. That is still one round trip each.
//
// # Waiting
//
// The Store wakes the calls that wait for a key (idempotency.WithWait)
// when its holder completes or releases it. [Store.Watch] implements
// [persistence.Notifier]. The scripts that complete and release a record
// publish on a channel named after its Redis key. They do it in the same
// run, so the holder pays no round trip for it. A Store subscribes for its
// waiting calls on one connection of its own. It opens it for the first,
// and closes it when none has waited for 30 seconds. A completion's
// message carries the completed record, up to 64 KiB of it. A waiter
// woken by one answers from it. That is two requests for a wait under two
// seconds. A release's message, or a larger record's, carries nothing: its
// waiters read the record once more. Each two seconds more add a poll,
// which covers a lost message. On a cluster, the messages reach every
// node.
//
// # Durability
//
// Redis and Valkey replicate asynchronously. A failover (Sentinel,
// ElastiCache, a cluster) can lose the writes a primary acknowledged just
// before it failed. During a manual failover, the old primary takes writes
// until it is demoted, and these are lost too. A lost reservation lets a
// retry run the handler a second time. A lost completion leaves the
// reservation. It blocks retries until its in-progress expiry, and then
// lets one run again. Idempotency holds across failovers only as far as
// the data survives them. MemoryDB acknowledges a write once it is in its
// multi-AZ transaction log, and so keeps it.
//
// On Redis, Valkey or ElastiCache with replicas, [Options.WaitReplicas]
// closes most of that window. Every write is followed by WAIT, in the same
// round trip. It counts as done only once that many replicas have
// acknowledged it.
//
//   - A reservation that is not acknowledged in time fails. The wrapped
//     handler does not run, and the caller gets a *idempotency.StoreError
//     it can retry.
//   - A completion that is not acknowledged in time is logged as a failed
//     completion, as any other.
//   - While fewer replicas than that are connected, every write fails.
//
// Each write then costs the replicas' acknowledgement as well, well under a
// millisecond on one network. WAIT does not make Redis strongly
// consistent. A failover can still promote a replica that had not
// acknowledged a write. With WaitReplicas equal to the number of replicas,
// every replica holds every acknowledged write. With fewer, Sentinel and
// Redis Cluster prefer the replica with the most data, but do not promise
// it.
// Where a second run after a failover is not acceptable, use MemoryDB or the
// DynamoDB store.
//
// # Responses
//
// The response is stored as it is, in the data field. A Redis string holds
// up to 512 MB, more than any Lambda response. So the store never needs to
// omit one. [Options.MaxResponseSize] sets a smaller limit if you want one,
// as the in-memory store does.
//
// # Errors
//
// The operations return these errors of package persistence, as they are:
//
//   - Put returns a [*persistence.ConflictError] only when a live record
//     holds the key.
//   - Update and Delete return [persistence.ErrFenced] only when the record
//     carries another token. Update also returns it when there is none.
//   - Get returns [persistence.ErrNotFound] only when there is no record.
//   - Update returns [persistence.ErrResponseOmitted] only when
//     [Options.MaxResponseSize] made it drop the response.
//
// With [Options.WaitReplicas], a write that too few replicas acknowledged
// returns an error that wraps [ErrNotReplicated].
//
// Every other failure is returned as an error that starts with
// "persistence/redis: " and the operation and key. It wraps the cause, so
// errors.Is and errors.As see it. The cause is one of these:
//
//   - context.DeadlineExceeded or a net.Error for timeouts
//   - a *net.OpError for a refused connection
//   - a redis.Error for a server error. redis.IsReadOnlyError reports
//     READONLY from a replica. WRONGTYPE is for a key that holds something
//     other than a record.
//
// None of them is ever reported as a conflict. An operation that fails on
// a replica writes nothing. The idempotency package reports a failed
// reservation to its caller as a *idempotency.StoreError, without running
// the handler. It logs a failed completion, and returns the handler's
// result (see idempotency.Guard.Do).
//
// A reservation that timed out may still be applied by the server once it
// answers again. It then holds the key until its in-progress expiry (the
// invocation's deadline). A Delete with its token that reaches the server
// after it releases the key sooner. The idempotency package sends one. But
// against a server that does not answer, it usually fails too.
//
// go-redis retries network errors, timeouts and READONLY (up to the client's
// MaxRetries, three by default). That is safe here. Update and Delete are
// idempotent. A Put may retry an attempt that was applied but whose reply
// was lost. It then finds the caller's own record, with the caller's
// token. The idempotency package recognises it as its own reservation.
//
// # Versions
//
// The scripts use only Lua and commands of Redis 4 and later, with no
// Redis 7 script flags. So they run on Redis 6 as well as on Redis 7 and
// Valkey. The tests run them against the machine's redis-server (Debian's
// Redis 7.0 so far). IDEMPOTENCY_REDIS_SERVER points them at another
// binary, such as a valkey-server.
package redis
