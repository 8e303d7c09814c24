package redis

import (
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
)

func defaultFields(t testing.TB) Fields {
	t.Helper()
	f, err := Fields{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// asReply turns HSET arguments into what a script returns for the hash:
// strings, as Redis sends bulk strings.
func asReply(args []any) []any {
	reply := make([]any, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			reply[i] = a
		case []byte:
			reply[i] = string(a)
		default:
			panic("unexpected argument type")
		}
	}
	return reply
}

// FuzzRecordEncoding checks that every record survives encoding to hash
// fields and decoding back, as the conformance suite compares records.
func FuzzRecordEncoding(f *testing.F) {
	f.Add("INPROGRESS", int64(1_800_003_600), int64(1_800_000_030_123), "9f86d0", "tok", []byte(nil), false, "", "")
	f.Add("COMPLETED", int64(1_800_003_600), int64(0), "", "tok", []byte(`{"id":"p_1"}`), false, "", "")
	f.Add("COMPLETED", int64(0), int64(-1), "", "", []byte{0, 1, 2, 255}, true, "CardDeclinedError", "declined – réessayez")
	f.Add("", int64(-62135596800), int64(1), "\x00", "\r\n", []byte("\r\n$3\r\n"), false, "", "only a message")
	f.Fuzz(func(t *testing.T, status string, expires, inProgressMs int64, hash, token string, data []byte, omitted bool, errType, errMsg string) {
		// Times a time.Time holds exactly; zero in-progress expiry means none.
		if expires < -1e12 || expires > 1e12 || inProgressMs < -1e15 || inProgressMs > 1e15 {
			t.Skip()
		}
		rec := &persistence.Record{
			Key:             "k",
			Status:          persistence.Status(status),
			ExpiresAt:       time.Unix(expires, 0),
			PayloadHash:     hash,
			Token:           token,
			Response:        data,
			ResponseOmitted: omitted,
			ErrorType:       errType,
			ErrorMessage:    errMsg,
		}
		if inProgressMs != 0 {
			rec.InProgressExpiresAt = time.UnixMilli(inProgressMs)
		}
		fields := defaultFields(t)
		got, err := fields.decode(rec.Key, asReply(fields.encode(rec, rec.Response, rec.ResponseOmitted)))
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", rec, err)
		}
		if diff := recordtest.Diff(got, rec); diff != "" {
			t.Fatalf("decode(encode(%+v)) differs:\n%s", rec, diff)
		}
	})
}

// FuzzDecode feeds decode hashes that are not records: it must return an
// error or a record, never panic.
func FuzzDecode(f *testing.F) {
	f.Add("status", "COMPLETED", "expiration", "12", "in_progress_expiration", "x")
	f.Add("status", "INPROGRESS", "expiration", "9223372036854775808", "data", "")
	f.Add("", "", "expiration", "-1", "response_omitted", "1")
	f.Fuzz(func(t *testing.T, f1, v1, f2, v2, f3, v3 string) {
		fields := defaultFields(t)
		rec, err := fields.decode("k", []any{f1, v1, f2, v2, f3, v3})
		if err == nil && rec == nil {
			t.Fatal("decode returned neither a record nor an error")
		}
	})
}

func TestDecodeRejects(t *testing.T) {
	fields := defaultFields(t)
	for name, reply := range map[string][]any{
		"odd":           {"status"},
		"not a string":  {"status", int64(1)},
		"no status":     {"expiration", "1"},
		"no expiration": {"status", "COMPLETED"},
		"bad number":    {"status", "COMPLETED", "expiration", "soon"},
		"bad ms":        {"status", "COMPLETED", "expiration", "1", "in_progress_expiration", "1.5"},
	} {
		if rec, err := fields.decode("k", reply); err == nil {
			t.Errorf("%s: decode(%q) = %+v, want an error", name, reply, rec)
		}
	}
}
