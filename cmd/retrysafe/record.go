package main

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/persistence"
)

// state is what a record means at a time, which its stored status alone
// does not say: expiry is decided by the library, not by the store.
type state struct {
	name    string // in the tables
	id      string // in JSON
	meaning string // what it means for a retry with the key
}

var (
	stateInProgress = state{"in progress", "in_progress", "a call holds the key; retries get InProgressError (409 over HTTP) until its in-progress expiry"}
	stateStuck      = state{"stuck", "stuck", "in progress past its in-progress expiry (the call crashed or timed out); the next retry takes the key over and runs the handler again"}
	stateCompleted  = state{"completed", "completed", "retries get the stored response"}
	stateFailed     = state{"completed", "completed", "an error was recorded; retries get it (StoredError; a problem response over HTTP)"}
	stateOmitted    = state{"completed", "completed", "the response was too large to store; retries get ResponseTooLargeError"}
	stateExpired    = state{"expired", "expired", "past its expiry, not deleted yet; it holds the key no more, and the next call runs the handler"}
	stateOther      = state{"unknown", "unknown", "a status the library does not write"}
)

// stateOf returns the state of rec at now.
func stateOf(rec *persistence.Record, now time.Time) state {
	switch {
	case rec.Status == persistence.StatusInProgress && !rec.InProgressExpiresAt.IsZero() && rec.InProgressExpiresAt.Before(now):
		return stateStuck
	case !rec.Live(now):
		return stateExpired
	case rec.Status == persistence.StatusInProgress:
		return stateInProgress
	case rec.Status != persistence.StatusCompleted:
		return stateOther
	case rec.ErrorType != "":
		return stateFailed
	case rec.ResponseOmitted:
		return stateOmitted
	}
	return stateCompleted
}

// recordJSON is a record in JSON output. Listings leave the response
// out; get puts it in.
type recordJSON struct {
	Key                 string     `json:"key"`
	Status              string     `json:"status"`
	State               string     `json:"state"`
	ExpiresAt           time.Time  `json:"expires_at"`
	InProgressExpiresAt *time.Time `json:"in_progress_expires_at,omitempty"`
	// WrittenAt is when the record was written, as far as the listing's
	// expiry tells (see writtenAt).
	WrittenAt   *time.Time `json:"written_at,omitempty"`
	OwnerToken  string     `json:"owner_token"`
	PayloadHash string     `json:"payload_hash,omitempty"`

	ResponseSize    *int `json:"response_size,omitempty"`
	ResponseOmitted bool `json:"response_omitted,omitempty"`
	// The response: as JSON when it is JSON, as text when it is UTF-8,
	// otherwise in base64.
	Response       json.RawMessage `json:"response,omitempty"`
	ResponseText   string          `json:"response_text,omitempty"`
	ResponseBase64 []byte          `json:"response_base64,omitempty"`
	Error          *storedError    `json:"error,omitempty"`
}

type storedError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// toJSON returns rec in JSON output, at now; written is zero when unknown.
func toJSON(rec *persistence.Record, now, written time.Time) *recordJSON {
	j := &recordJSON{
		Key:             rec.Key,
		Status:          string(rec.Status),
		State:           stateOf(rec, now).id,
		ExpiresAt:       rec.ExpiresAt.UTC(),
		OwnerToken:      rec.Token,
		PayloadHash:     rec.PayloadHash,
		ResponseOmitted: rec.ResponseOmitted,
	}
	if !rec.InProgressExpiresAt.IsZero() {
		t := rec.InProgressExpiresAt.UTC()
		j.InProgressExpiresAt = &t
	}
	if !written.IsZero() {
		t := written.UTC()
		j.WrittenAt = &t
	}
	if rec.ErrorType != "" || rec.ErrorMessage != "" {
		j.Error = &storedError{rec.ErrorType, rec.ErrorMessage}
	}
	return j
}

// withResponse adds rec's response to j.
func (j *recordJSON) withResponse(rec *persistence.Record) *recordJSON {
	n := len(rec.Response)
	j.ResponseSize = &n
	switch {
	case n == 0:
	case json.Valid(rec.Response):
		var b bytes.Buffer
		_ = json.Compact(&b, rec.Response) // valid: cannot fail
		j.Response = b.Bytes()
	case utf8.Valid(rec.Response):
		j.ResponseText = string(rec.Response)
	default:
		j.ResponseBase64 = rec.Response
	}
	return j
}

// writtenAt returns when rec was last written (reserved or completed),
// given the expiry the function keeps records for: records keep no time
// of writing, but their expiry is that time plus the expiry. It returns
// the zero time when that would be after now: the function's expiry is
// longer than the one given, and the time cannot be told.
func writtenAt(rec *persistence.Record, expiry time.Duration, now time.Time) time.Time {
	t := rec.ExpiresAt.Add(-expiry)
	if t.After(now) {
		return time.Time{}
	}
	return t
}
