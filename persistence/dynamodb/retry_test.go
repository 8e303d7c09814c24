package dynamodb_test

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

const conflictCode = "ReplicatedWriteConflictException"

// conflictStore returns a store on table whose client sends its requests
// through the faults returned, counted by the counter returned. The
// client's retryer makes 3 attempts (the tests' servers' clients).
func (srv server) conflictStore(t *testing.T, table string) (*dynamodb.Store, *dynalite.Faults, *dynalite.Counter) {
	t.Helper()
	faults := &dynalite.Faults{}
	counter := &dynalite.Counter{}
	return newStore(t, srv.NewClient(faults.Register, counter.Register), table), faults, counter
}

// The SDK for Go does not retry ReplicatedWriteConflictException by
// itself: a request the store does not send answers the first conflict.
// Should the SDK start retrying it, this test says so.
func TestReplicatedWriteConflictNotRetriedByTheSDK(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name := srv.table(t)
		faults := &dynalite.Faults{}
		counter := &dynalite.Counter{}
		client := srv.NewClient(faults.Register, counter.Register)
		faults.AnswerError("PutItem", http.StatusBadRequest, conflictCode, 1)
		_, err := client.PutItem(t.Context(), &awsdynamodb.PutItemInput{TableName: &name, Item: idKey("k")})
		var conflict *types.ReplicatedWriteConflictException
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, 1, counter.Attempts("PutItem"))
	})
}

// A failed condition is an answer, sent once: the store's writes are not
// retried on it even by a client whose retryer retries every error.
func TestFailedConditionNotRetried(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		now := wholeSecond()
		counter := &dynalite.Counter{}
		store := newStore(t, srv.NewClient(counter.Register, func(o *awsdynamodb.Options) {
			o.Retryer = retryEverything{retry.NewStandard()}
		}), name)
		rec := inProgress(now)
		require.NoError(t, healthy.Put(t.Context(), rec, now))

		other := inProgress(now)
		other.Key = rec.Key
		var conflict *persistence.ConflictError
		require.ErrorAs(t, store.Put(t.Context(), other, now), &conflict)
		require.ErrorIs(t, store.Update(t.Context(), completed(other, []byte("1"))), persistence.ErrFenced)
		require.ErrorIs(t, store.Delete(t.Context(), rec.Key, other.Token), persistence.ErrFenced)
		for _, op := range []string{"PutItem", "UpdateItem", "DeleteItem"} {
			require.Equal(t, 1, counter.Attempts(op), op)
		}
	})
}

// retryEverything is a retryer that retries every error.
type retryEverything struct{ aws.Retryer }

func (retryEverything) IsErrorRetryable(error) bool { return true }

// Each write the store sends is retried after a ReplicatedWriteConflictException,
// which DynamoDB answers without applying the write: DynamoDB answers the
// conflict twice, and the third attempt applies it.
func TestReplicatedWriteConflictRetried(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		now := wholeSecond()

		t.Run("PutItem", func(t *testing.T) {
			store, faults, counter := srv.conflictStore(t, name)
			rec := inProgress(now)
			faults.AnswerError("PutItem", http.StatusBadRequest, conflictCode, 2)
			require.NoError(t, store.Put(t.Context(), rec, now))
			require.Equal(t, 2, faults.Fired(dynalite.Answered))
			require.Equal(t, 1, counter.Calls("PutItem"))
			require.Equal(t, 3, counter.Attempts("PutItem"))
			got, err := healthy.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, rec))
		})

		t.Run("UpdateItem", func(t *testing.T) {
			store, faults, counter := srv.conflictStore(t, name)
			rec := inProgress(now)
			require.NoError(t, healthy.Put(t.Context(), rec, now))
			faults.AnswerError("UpdateItem", http.StatusBadRequest, conflictCode, 2)
			done := completed(rec, []byte(`{"id":"p_1"}`))
			require.NoError(t, store.Update(t.Context(), done))
			require.Equal(t, 3, counter.Attempts("UpdateItem"))
			got, err := healthy.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, done))
		})

		t.Run("DeleteItem", func(t *testing.T) {
			store, faults, counter := srv.conflictStore(t, name)
			rec := inProgress(now)
			require.NoError(t, healthy.Put(t.Context(), rec, now))
			faults.AnswerError("DeleteItem", http.StatusBadRequest, conflictCode, 2)
			require.NoError(t, store.Delete(t.Context(), rec.Key, rec.Token))
			require.Equal(t, 3, counter.Attempts("DeleteItem"))
			_, err := healthy.Get(t.Context(), rec.Key)
			require.ErrorIs(t, err, persistence.ErrNotFound)
		})

		t.Run("DeleteRecord", func(t *testing.T) {
			store, faults, counter := srv.conflictStore(t, name)
			rec := inProgress(now)
			require.NoError(t, healthy.Put(t.Context(), rec, now))
			faults.AnswerError("DeleteItem", http.StatusBadRequest, conflictCode, 2)
			require.NoError(t, store.DeleteRecord(t.Context(), rec))
			require.Equal(t, 3, counter.Attempts("DeleteItem"))
			_, err := healthy.Get(t.Context(), rec.Key)
			require.ErrorIs(t, err, persistence.ErrNotFound)
		})
	})
}

// A retried write finds what an earlier attempt of it did, as the protocol
// has it (docs/protocol.md, Lost replies, retries, and late writes): the
// first attempt applies and its reply is lost, the second meets a
// conflict with another Region, and the third finds the first's effect.
func TestReplicatedWriteConflictAfterALostReply(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		now := wholeSecond()

		t.Run("PutItem", func(t *testing.T) {
			faults := &dynalite.Faults{}
			store := newStore(t, srv.withAllOld(srv.NewClient(faults.Register)), name)
			rec := inProgress(now)
			faults.LoseReply("PutItem", 1)
			faults.AnswerError("PutItem", http.StatusBadRequest, conflictCode, 1)
			err := store.Put(t.Context(), rec, now)
			// The reservation's own record: a conflict carrying the
			// caller's token, by which the caller knows it holds the key.
			var conflict *persistence.ConflictError
			require.ErrorAs(t, err, &conflict)
			require.NotNil(t, conflict.Existing)
			require.Equal(t, rec.Token, conflict.Existing.Token)
			require.Equal(t, 1, faults.Fired(dynalite.LostReply))
			require.Equal(t, 1, faults.Fired(dynalite.Answered))
		})

		t.Run("UpdateItem", func(t *testing.T) {
			store, faults, _ := srv.conflictStore(t, name)
			rec := inProgress(now)
			require.NoError(t, healthy.Put(t.Context(), rec, now))
			faults.LoseReply("UpdateItem", 1)
			faults.AnswerError("UpdateItem", http.StatusBadRequest, conflictCode, 1)
			done := completed(rec, []byte(`"r"`))
			require.NoError(t, store.Update(t.Context(), done), "done: its own completion is there")
			got, err := healthy.Get(t.Context(), rec.Key)
			require.NoError(t, err)
			require.Empty(t, recordtest.Diff(got, done))
		})

		t.Run("DeleteItem", func(t *testing.T) {
			store, faults, _ := srv.conflictStore(t, name)
			rec := inProgress(now)
			require.NoError(t, healthy.Put(t.Context(), rec, now))
			faults.LoseReply("DeleteItem", 1)
			faults.AnswerError("DeleteItem", http.StatusBadRequest, conflictCode, 1)
			require.NoError(t, store.Delete(t.Context(), rec.Key, rec.Token), "done: the record is gone")
		})
	})
}

// Conflicts on every attempt exhaust the retryer: the write fails with the
// conflict, a failure of the service (never a conflict of the protocol or
// fencing), and nothing is written.
func TestReplicatedWriteConflictExhausted(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		now := wholeSecond()
		store, faults, counter := srv.conflictStore(t, name)
		faults.AnswerError("", http.StatusBadRequest, conflictCode, -1)
		requireConflict := func(t *testing.T, err error) {
			t.Helper()
			requireServiceError(t, err)
			var conflict *types.ReplicatedWriteConflictException
			require.ErrorAs(t, err, &conflict)
		}

		rec := inProgress(now)
		requireConflict(t, store.Put(t.Context(), rec, now))
		require.Equal(t, 3, counter.Attempts("PutItem"), "the client's retryer's attempts")
		_, err := healthy.Get(t.Context(), rec.Key)
		require.ErrorIs(t, err, persistence.ErrNotFound)

		require.NoError(t, healthy.Put(t.Context(), rec, now))
		requireConflict(t, store.Update(t.Context(), completed(rec, []byte("1"))))
		requireConflict(t, store.Delete(t.Context(), rec.Key, rec.Token))
		require.Equal(t, 3, counter.Attempts("UpdateItem"))
		require.Equal(t, 3, counter.Attempts("DeleteItem"))
		got, err := healthy.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		require.Empty(t, recordtest.Diff(got, rec))
	})
}

// A commit's TransactWriteItems is retried too: a global table of eventual
// consistency runs transactions.
func TestReplicatedWriteConflictRetriedCommit(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		name, healthy, _ := srv.setup(t)
		counters := srv.counterTable(t)
		store, faults, counter := srv.conflictStore(t, name)
		rec := inProgress(wholeSecond())
		require.NoError(t, healthy.Put(t.Context(), rec, wholeSecond()))
		faults.AnswerError("TransactWriteItems", http.StatusBadRequest, conflictCode, 2)
		done := completed(rec, []byte(`"x"`))
		require.NoError(t, store.Commit(t.Context(), done, []any{increment(counters, "conflicted")}))
		require.Equal(t, 3, counter.Attempts("TransactWriteItems"))
		assert.Equal(t, 1, count(t, srv.NewClient(), counters, "conflicted"))
	})
}
