package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/idempotency/httpapi"
	"github.com/retrysafe/retrysafe/internal/core"
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
	stateHeld       = state{"held", "held", "the call ended without an outcome, and the key is held (WithHoldUntilReleased); retries get HeldError (409 key-held over HTTP) until someone checks its side effect and runs release"}
	stateCompleted  = state{"completed", "completed", "retries get the stored response"}
	stateFailed     = state{"completed", "completed", "an error was recorded; retries get it (RecordedError; a problem response over HTTP)"}
	stateOmitted    = state{"completed", "completed", "the response was too large to store; retries get ResponseTooLargeError"}
	stateExpired    = state{"expired", "expired", "past its expiry, not deleted yet; it holds the key no more, and the next call runs the handler"}
	stateOther      = state{"unknown", "unknown", "a status the library does not write"}
)

// stateOf returns the state of rec at now.
func stateOf(rec *persistence.Record, now time.Time) state {
	switch {
	case rec.Held && rec.Lapsed(now) && rec.Live(now):
		return stateHeld
	case rec.Lapsed(now):
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
	Key string `json:"key"`
	// Step is the step's name, in get --steps.
	Step string `json:"step,omitempty"`
	// Tenant is the tenant ID that scopes the key (Lambda tenant
	// isolation).
	Tenant              string     `json:"tenant,omitempty"`
	Status              string     `json:"status"`
	State               string     `json:"state"`
	ExpiresAt           time.Time  `json:"expires_at"`
	InProgressExpiresAt *time.Time `json:"in_progress_expires_at,omitempty"`
	// Held: the reservation keeps its key past its in-progress expiry,
	// until it is released (WithHoldUntilReleased).
	Held bool `json:"held,omitempty"`
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
		Held:            rec.Held,
	}
	if _, tenant, _, ok := core.SplitKey(rec.Key); ok {
		j.Tenant = tenant
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

// writeSlack allows for the library's rounding of expiries up to the
// next second, and for a second between the writer's clock and this one:
// a record written just now may expire that much later than now plus its
// expiry.
const writeSlack = 2 * time.Second

// defaultExpiries are what writtenAt takes records to be kept for without
// --expiry, in this order: the library's default, then the HTTP
// adapters', for records that expire too late for the first.
var defaultExpiries = []time.Duration{idempotency.DefaultExpiry, httpapi.DefaultExpiry}

// writtenAt returns when rec was last written (reserved, renewed or
// completed), and the expiry it takes the function to keep records for:
// records keep no time of writing, but their expiry is that time plus the
// function's expiry (expiry, or without it, 0, the first of
// defaultExpiries that does not put the time after now). It returns the
// zero time when the function keeps records longer, and the time cannot
// be told.
func writtenAt(rec *persistence.Record, expiry time.Duration, now time.Time) (time.Time, time.Duration) {
	expiries := defaultExpiries
	if expiry > 0 {
		expiries = []time.Duration{expiry}
	}
	for _, d := range expiries {
		switch t := rec.ExpiresAt.Add(-d); {
		case !t.After(now):
			return t, d
		case t.Sub(now) <= writeSlack:
			return now, d
		}
	}
	return time.Time{}, 0
}

// writeOrder orders records by when they were written, as far as
// writtenAt tells, the others after them by expiry; then by key.
func writeOrder(expiry time.Duration, now time.Time) func(a, b *persistence.Record) int {
	at := func(rec *persistence.Record) time.Time {
		if t, _ := writtenAt(rec, expiry, now); !t.IsZero() {
			return t
		}
		return rec.ExpiresAt // after now: after every known time
	}
	return func(a, b *persistence.Record) int {
		return cmp.Or(at(a).Compare(at(b)), strings.Compare(a.Key, b.Key))
	}
}
