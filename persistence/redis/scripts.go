package redis

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The store's operations are Lua scripts, each touching only KEYS[1], so
// each is atomic, runs on the primary that owns the key's slot, and costs one
// round trip (EVALSHA; EVAL once more after the server lost its script cache).
//
// Scripts are written for Lua 5.1 as embedded in Redis 2.6 and later and in
// Valkey, without the Redis 7 shebang, so they run unchanged on Redis 6.
//
// Guard: every script first runs HDEL of a field no record has (ARGV[1],
// guardField). It changes nothing and is not replicated, but a read-only
// replica refuses it with READONLY, as it refuses the writes. So every
// operation sent to a replica fails with READONLY, including those that
// would answer without writing (a conflict, a fenced update or delete, a
// read), instead of answering from a copy that may be stale.

// recordScript returns the script that runs body after the prelude every
// script shares. The prelude names KEYS[1] key and its type kind, fails
// unless it holds a hash or nothing, and runs the guard, ARGV[1].
func recordScript(body string) *redis.Script {
	return redis.NewScript(`
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then
  return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not an idempotency record')
end
redis.call('HDEL', key, ARGV[1])
` + body)
}

// putScript reserves KEYS[1] unless a live record holds it
// (docs/protocol.md: reserve, which applies over no record or one that is
// not live, and is a conflict otherwise).
//
//	ARGV[1]    the guard field
//	ARGV[2]    now, in epoch milliseconds rounded up
//	ARGV[3]    the new record's expiry, in epoch milliseconds, for PEXPIREAT
//	ARGV[4]    the in-progress status value
//	ARGV[5..7] field names: status, expiration (epoch seconds),
//	           in_progress_expiration (epoch milliseconds)
//	ARGV[8]    the token field name
//	ARGV[9]    the caller's token
//	ARGV[10]   the held field name
//	ARGV[11..] the new record's fields and values
//
// It returns 1 when it wrote the record, or the existing record's fields and
// values (as HGETALL) when a live record holds the key.
//
// A live record with the caller's token is the caller's own, written by an
// earlier attempt whose reply was lost, perhaps on another connection. The
// script then sets the token to the value it has: a write that changes
// nothing but is replicated, so that a WAIT after the script on this
// connection (Options.WaitReplicas) covers the record written before it
// too, replication being one ordered stream. (WAIT counts a connection's
// writes; Redis 7.0 also waits on a connection without any, but that is
// not documented.)
//
// A record is live at now unless expiration < now, or it is in progress,
// not held, and in_progress_expiration < now: persistence.Record.Live. With integers
// a and the caller's exact time t, a < t exactly when a < ceil(t), so the
// caller rounds now up to the millisecond and the comparison is exact.
var putScript = recordScript(`
if kind == 'hash' then
  local f = redis.call('HMGET', key, ARGV[5], ARGV[6], ARGV[7], ARGV[10])
  local expires = tonumber(f[2])
  if not f[1] or not expires then
    return redis.error_reply('WRONGTYPE key holds a hash that is not an idempotency record (no status or expiration field)')
  end
  local now = tonumber(ARGV[2])
  local live = expires * 1000 >= now
  if live and f[1] == ARGV[4] and f[3] and not f[4] then
    local until_ms = tonumber(f[3])
    if not until_ms then
      return redis.error_reply('WRONGTYPE key holds a record with a malformed in-progress expiration')
    end
    live = until_ms >= now
  end
  if live then
    if redis.call('HGET', key, ARGV[8]) == ARGV[9] then
      redis.call('HSET', key, ARGV[8], ARGV[9])
    end
    return redis.call('HGETALL', key)
  end
  redis.call('DEL', key)
end
redis.call('HSET', key, unpack(ARGV, 11))
redis.call('PEXPIREAT', key, ARGV[3])
return 1
`)

// ownScript returns the script that runs body on the caller's own record
// at KEYS[1], the one that carries the caller's token: after the prelude
// (see recordScript), it returns 0 when there is no record and -1 when the
// record carries another token. body has the record's status in local
// status.
//
//	ARGV[1] the guard field
//	ARGV[2] the caller's token
//	ARGV[3] the token field name
//	ARGV[4] the status field name
//	ARGV[5] the in-progress status value
func ownScript(body string) *redis.Script {
	return recordScript(`
if kind == 'none' then
  return 0
end
local f = redis.call('HMGET', key, ARGV[3], ARGV[4])
if f[1] ~= ARGV[2] then
  return -1
end
local status = f[2]
` + body)
}

// updateScript replaces the record at KEYS[1] if it is the caller's own
// reservation: it carries the caller's token and is in progress
// (docs/protocol.md: renew, complete, record an error). Its first
// arguments are those of ownScript.
//
//	ARGV[6]    the completed status value when the write completes the
//	           record, "" when it renews it
//	ARGV[7]    the new record's expiry, in epoch milliseconds, for PEXPIREAT
//	ARGV[8]    the in-progress expiration field name
//	ARGV[9]    a renewal's in-progress expiry, in epoch milliseconds; ""
//	           for a completion
//	ARGV[10..] the new record's fields and values
//
// It returns 1 when it wrote the record; 0 when there is no record; -1
// when the record carries another token; 2 when the write completes the
// record and finds it completed with the caller's token already (an
// earlier attempt applied it: done); 3 when a renewal finds a later
// in-progress expiry (a later renewal applied: a renewal never shortens
// the lease); and -2 when the record is the caller's but not in progress
// otherwise (a renewal of a completed record). It writes nothing but on
// 1. On 2 and 3 it writes the token field with the value it has, which
// changes nothing but is replicated, so that a WAIT after the script
// covers the earlier write (see putScript). A completion it applies is
// published on the channel named KEYS[1], to wake waiters (notify.go):
// the record's fields and values, each as its length, a colon and itself
// ("5:hello"), or "" when they are longer than maxMessage bytes together.
var updateScript = ownScript(`
if status ~= ARGV[5] then
  if ARGV[6] ~= '' and status == ARGV[6] then
    redis.call('HSET', key, ARGV[3], ARGV[2])
    return 2
  end
  return -2
end
if ARGV[9] ~= '' then
  local until_ms = tonumber(redis.call('HGET', key, ARGV[8]))
  if until_ms and until_ms > tonumber(ARGV[9]) then
    redis.call('HSET', key, ARGV[3], ARGV[2])
    return 3
  end
end
redis.call('DEL', key)
redis.call('HSET', key, unpack(ARGV, 10))
redis.call('PEXPIREAT', key, ARGV[7])
if ARGV[6] ~= '' then
  local size, parts = 0, {}
  for i = 10, #ARGV do
    size = size + #ARGV[i]
  end
  if size <= ` + strconv.Itoa(maxMessage) + ` then
    for i = 10, #ARGV do
      parts[#parts + 1] = #ARGV[i] .. ':' .. ARGV[i]
    end
  end
  redis.call('PUBLISH', key, table.concat(parts))
end
return 1
`)

// deleteScript deletes the record at KEYS[1] if it is the caller's own
// reservation: it carries the caller's token and is in progress
// (docs/protocol.md: release). Its arguments are those of ownScript.
//
// It returns 1 when it deleted the record, 0 when there is no record, -1
// when the record carries another token, and -2 when it is the caller's
// but not in progress (completed: a release applied late must not delete
// the result). A release it applies is published on the channel named
// KEYS[1], as updateScript publishes a completion.
var deleteScript = ownScript(`
if status ~= ARGV[5] then
  return -2
end
redis.call('DEL', key)
redis.call('PUBLISH', key, '')
return 1
`)

// getScript reads the record at KEYS[1] on the primary.
//
//	ARGV[1] the guard field
//
// It returns the record's fields and values (as HGETALL), none when there is
// no record.
var getScript = recordScript(`
return redis.call('HGETALL', key)
`)
