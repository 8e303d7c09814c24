package redis

import (
	"fmt"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// encode returns rec as the hash's fields and values, in the order HSET
// takes them. Fields whose value is the zero value are left out (Response
// nil and empty alike), except status, expiration and token, which every
// record has.
func (f *Fields) encode(rec *persistence.Record, response []byte, omitted bool) []any {
	args := make([]any, 0, 18)
	args = append(args,
		f.Status, string(rec.Status),
		f.Expiration, strconv.FormatInt(rec.ExpiresAt.Unix(), 10),
	)
	if !rec.InProgressExpiresAt.IsZero() {
		args = append(args, f.InProgressExpiration, strconv.FormatInt(rec.InProgressExpiresAt.UnixMilli(), 10))
	}
	if rec.PayloadHash != "" {
		args = append(args, f.Validation, rec.PayloadHash)
	}
	if len(response) > 0 {
		args = append(args, f.Data, response)
	}
	args = append(args, f.Token, rec.Token)
	if rec.ErrorType != "" {
		args = append(args, f.ErrorType, rec.ErrorType)
	}
	if rec.ErrorMessage != "" {
		args = append(args, f.ErrorMessage, rec.ErrorMessage)
	}
	if omitted {
		args = append(args, f.ResponseOmitted, "1")
	}
	if rec.Held && rec.Status == persistence.StatusInProgress {
		args = append(args, f.Held, "1")
	}
	return args
}

// decode builds the record for key from a hash's fields and values as a
// script returns them (HGETALL: field, value, field, value, ...). Fields it
// does not know are ignored.
func (f *Fields) decode(key string, reply []any) (*persistence.Record, error) {
	if len(reply)%2 != 0 {
		return nil, fmt.Errorf("odd number of elements (%d) in a hash reply", len(reply))
	}
	rec := &persistence.Record{Key: key}
	var hasStatus, hasExpiration bool
	for i := 0; i < len(reply); i += 2 {
		name, ok1 := reply[i].(string)
		value, ok2 := reply[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("unexpected element types %T, %T in a hash reply", reply[i], reply[i+1])
		}
		switch name {
		case f.Status:
			rec.Status = persistence.Status(value)
			hasStatus = true
		case f.Expiration:
			sec, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", name, err)
			}
			rec.ExpiresAt = time.Unix(sec, 0)
			hasExpiration = true
		case f.InProgressExpiration:
			ms, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", name, err)
			}
			rec.InProgressExpiresAt = time.UnixMilli(ms)
		case f.Validation:
			rec.PayloadHash = value
		case f.Data:
			rec.Response = []byte(value)
		case f.Token:
			rec.Token = value
		case f.ErrorType:
			rec.ErrorType = value
		case f.ErrorMessage:
			rec.ErrorMessage = value
		case f.ResponseOmitted:
			rec.ResponseOmitted = value == "1"
		case f.Held:
			rec.Held = value == "1"
		}
	}
	if !hasStatus || !hasExpiration {
		return nil, fmt.Errorf("the hash is not an idempotency record: no %s or %s field", f.Status, f.Expiration)
	}
	return rec, nil
}
