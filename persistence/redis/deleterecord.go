package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/retrysafe/retrysafe/persistence"
)

// DeleteRecord deletes the record for seen.Key, but only if the stored
// record is still seen. That is the same status, owner token, expiry and
// in-progress expiry. It is for operators' tools, which delete a record
// they have read and shown. The library releases keys with [Store.Delete],
// which deletes only the caller's own reservation.
//
// It runs one script. It returns [persistence.ErrNotFound] when there is no
// record. It returns [persistence.ErrChanged], deleting nothing, when the
// record is not seen any more. Other failures are returned wrapped, as by
// the other operations.
func (s *Store) DeleteRecord(ctx context.Context, seen *persistence.Record) error {
	inProgress := ""
	if !seen.InProgressExpiresAt.IsZero() {
		inProgress = strconv.FormatInt(seen.InProgressExpiresAt.UnixMilli(), 10)
	}
	reply, acks, err := s.runScript(ctx, deleteRecordScript, seen.Key, guardField,
		s.fields.Status, string(seen.Status),
		s.fields.Token, seen.Token,
		s.fields.Expiration, strconv.FormatInt(seen.ExpiresAt.Unix(), 10),
		s.fields.InProgressExpiration, inProgress)
	if err != nil {
		return s.opError("delete", seen.Key, err)
	}
	switch reply {
	case int64(1):
		return s.replicated("delete", seen.Key, acks)
	case int64(0):
		return persistence.ErrNotFound
	case int64(-1):
		return persistence.ErrChanged
	}
	return s.opError("delete", seen.Key, fmt.Errorf("unexpected script reply %#v", reply))
}

// deleteRecordScript deletes the record at KEYS[1] if its fields are those
// of the record the caller read.
//
//	ARGV[1]    the guard field
//	ARGV[2..9] field names and values: status, token, expiration (epoch
//	           seconds), in_progress_expiration (epoch milliseconds, ""
//	           for none)
//
// It returns 1 when it deleted the record, 0 when there is no record, and
// -1 when the record differs. A release it applies is published on the
// channel named KEYS[1], to wake waiters (notify.go).
var deleteRecordScript = recordScript(`
if kind == 'none' then
  return 0
end
local f = redis.call('HMGET', key, ARGV[2], ARGV[4], ARGV[6], ARGV[8])
if f[1] ~= ARGV[3] or f[2] ~= ARGV[5] or f[3] ~= ARGV[7] then
  return -1
end
if (ARGV[9] == '' and f[4]) or (ARGV[9] ~= '' and f[4] ~= ARGV[9]) then
  return -1
end
redis.call('DEL', key)
redis.call('PUBLISH', key, '')
return 1
`)
