package dynamodb_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/recordtest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
	"github.com/retrysafe/retrysafe/persistence/storetest"
)

// eachTransactionalServer runs f against each server that has
// TransactWriteItems (DynamoDB Local; not dynalite), skipping the others
// with the reason.
func eachTransactionalServer(t *testing.T, f func(t *testing.T, srv server)) {
	t.Helper()
	eachServer(t, func(t *testing.T, srv server) {
		if !srv.Transactions {
			t.Skipf("%s has no TransactWriteItems", srv.Kind.Title)
		}
		f(t, srv)
	})
}

// counterTable creates a table of counters, keyed by "name", and returns
// its name.
func (srv server) counterTable(t testing.TB) string {
	t.Helper()
	return srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
		_, err := client.CreateTable(ctx, &awsdynamodb.CreateTableInput{
			TableName:            &name,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("name"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("name"), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		if err != nil {
			return err
		}
		// dynalite's tables are CREATING for a moment, as DynamoDB's are.
		return awsdynamodb.NewTableExistsWaiter(client, func(o *awsdynamodb.TableExistsWaiterOptions) {
			o.MinDelay, o.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
		}).Wait(ctx, &awsdynamodb.DescribeTableInput{TableName: &name}, 30*time.Second)
	})
}

// commitHarness returns the conformance harness of Commit on the server:
// counters are items of a table of their own, incremented by staged
// Updates.
func (srv server) commitHarness(t *testing.T, store persistence.Committer) storetest.CommitHarness {
	counters := srv.counterTable(t)
	client := srv.NewClient()
	return storetest.CommitHarness{
		NewStore:  func(*testing.T) persistence.Committer { return store },
		Increment: func(_ *testing.T, name string) any { return increment(counters, name) },
		Failing: func(*testing.T) any {
			return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName:           &counters,
				Key:                 map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: "never-written"}},
				ConditionExpression: aws.String("attribute_exists(#name)"),
				ExpressionAttributeNames: map[string]string{
					"#name": "name",
				},
			}}
		},
		Count: func(t *testing.T, name string) int { return count(t, client, counters, name) },
	}
}

func increment(table, name string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 &table,
		Key:                       map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: name}},
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": "n"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	}}
}

func count(t *testing.T, client *awsdynamodb.Client, table, name string) int {
	t.Helper()
	out, err := client.GetItem(t.Context(), &awsdynamodb.GetItemInput{
		TableName:      &table,
		Key:            map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: name}},
		ConsistentRead: aws.Bool(true),
	})
	require.NoError(t, err)
	n, ok := out.Item["n"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	require.NoError(t, err)
	return v
}

func TestConformanceCommit(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		storetest.RunCommit(t, srv.commitHarness(t, store))
	})
}

func TestConformanceCommitSortKey(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t, func(o *dynamodb.Options) {
			o.KeyAttr = "pk"
			o.SortKeyAttr = "sk"
			o.StaticPKValue = "idempotency#commit"
		})
		storetest.RunCommit(t, srv.commitHarness(t, store))
	})
}

// The local cache passes commits through, and the suite holds with it in
// front of the store.
func TestConformanceCommitCached(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		storetest.RunCommit(t, srv.commitHarness(t, memory.NewCache(store, 1000)))
	})
}

// A commit with writes is one TransactWriteItems: the writes in order, then
// the fenced completion, with a ClientRequestToken of the invocation's.
func TestCommitRequest(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		name := srv.table(t)
		counters := srv.counterTable(t)
		counter := &dynalite.Counter{}
		client := &txCapture{Client: srv.NewClient(counter.Register)}
		store := newStore(t, client, name)
		rec := inProgress(wholeSecond())
		require.NoError(t, store.Put(t.Context(), rec, wholeSecond()))
		counter.Reset()
		done := completed(rec, []byte(`"committed"`))
		require.NoError(t, store.Commit(t.Context(), done, []any{increment(counters, "a"), increment(counters, "b")}))
		assert.Equal(t, map[string]int{"TransactWriteItems": 1}, counter.Snapshot())

		sent := client.sent
		require.NotNil(t, sent)
		require.Len(t, sent.TransactItems, 3)
		assert.Equal(t, counters, *sent.TransactItems[0].Update.TableName)
		assert.Equal(t, "a", sent.TransactItems[0].Update.Key["name"].(*types.AttributeValueMemberS).Value)
		completion := sent.TransactItems[2].Update
		require.NotNil(t, completion)
		assert.Equal(t, name, *completion.TableName)
		assert.Contains(t, *completion.ConditionExpression, "= :")
		token := aws.ToString(sent.ClientRequestToken)
		assert.Len(t, token, 32)
		assert.NotContains(t, token, rec.Token, "the token is derived from the owner token, not the owner token")

		got, err := store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		require.Empty(t, recordtest.Diff(got, done))
	})
}

// txCapture is a Client that keeps the last TransactWriteItems it sends.
type txCapture struct {
	dynamodb.Client
	sent *awsdynamodb.TransactWriteItemsInput
}

func (c *txCapture) TransactWriteItems(ctx context.Context, in *awsdynamodb.TransactWriteItemsInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.TransactWriteItemsOutput, error) {
	c.sent = in
	return c.Client.TransactWriteItems(ctx, in, optFns...)
}

// Writes that are not transaction items, or over DynamoDB's limits, are
// refused before anything is sent.
func TestCommitRefusedBeforeSending(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, counter := srv.setup(t)
		counters := srv.counterTable(t)
		rec := inProgress(wholeSecond())
		require.NoError(t, store.Put(t.Context(), rec, wholeSecond()))
		counter.Reset()
		done := completed(rec, []byte(`"x"`))

		err := store.Commit(t.Context(), done, []any{"a ledger entry"})
		var canceled *persistence.CommitCanceledError
		require.ErrorAs(t, err, &canceled)
		assert.Contains(t, err.Error(), "staged write 0 is a string")

		many := make([]any, dynamodb.MaxTransactionItems)
		for i := range many {
			many[i] = increment(counters, "c"+strconv.Itoa(i))
		}
		err = store.Commit(t.Context(), done, many)
		var tooLarge *dynamodb.TransactionTooLargeError
		require.ErrorAs(t, err, &tooLarge)
		assert.Equal(t, dynamodb.MaxTransactionItems+1, tooLarge.Items)
		require.ErrorIs(t, err, persistence.ErrCommitCanceled)

		big := types.TransactWriteItem{Put: &types.Put{TableName: &counters, Item: map[string]types.AttributeValue{
			"name": &types.AttributeValueMemberS{Value: "big"},
			"blob": &types.AttributeValueMemberB{Value: make([]byte, 390<<10)},
		}}}
		var bigs []any
		for range 11 {
			bigs = append(bigs, big)
		}
		err = store.Commit(t.Context(), done, bigs)
		require.ErrorAs(t, err, &tooLarge)
		assert.Greater(t, tooLarge.Bytes, dynamodb.MaxTransactionBytes)

		assert.Zero(t, counter.Calls(), "nothing is sent: %v", counter)
		got, err := store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		assert.Equal(t, persistence.StatusInProgress, got.Status)
	})
}

// A transaction DynamoDB refuses as invalid (here, a staged write of the
// record itself) wrote nothing: it is canceled, not of unknown outcome.
func TestCommitInvalidTransaction(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		name, store, _ := srv.setup(t)
		rec := inProgress(wholeSecond())
		require.NoError(t, store.Put(t.Context(), rec, wholeSecond()))
		self := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName:           &name,
			Key:                 idKey(rec.Key),
			ConditionExpression: aws.String("attribute_exists(id)"),
		}}
		err := store.Commit(t.Context(), completed(rec, []byte(`"x"`)), []any{self})
		require.ErrorIs(t, err, persistence.ErrCommitCanceled)
		assert.False(t, errors.Is(err, persistence.ErrFenced))
		got, err := store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		assert.Equal(t, persistence.StatusInProgress, got.Status)
	})
}

// dynalite has no TransactWriteItems: a commit against it is refused, and
// nothing was written, so it is a canceled commit whose reason says what
// to do; Update-only commits still work.
func TestCommitWithoutTransactions(t *testing.T) {
	eachServer(t, func(t *testing.T, srv server) {
		if srv.Transactions {
			t.Skipf("%s has TransactWriteItems", srv.Kind.Title)
		}
		_, store, _ := srv.setup(t)
		rec := inProgress(wholeSecond())
		require.NoError(t, store.Put(t.Context(), rec, wholeSecond()))
		done := completed(rec, []byte(`"x"`))
		err := store.Commit(t.Context(), done, []any{increment("Counters", "a")})
		require.ErrorIs(t, err, persistence.ErrCommitCanceled)
		var unsupported *dynamodb.TransactionsUnsupportedError
		require.ErrorAs(t, err, &unsupported)
		assert.Contains(t, err.Error(), "turn idempotency.WithTransactions off")
		got, err := store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		assert.Empty(t, recordtest.Diff(got, rec), "a refused commit writes nothing")
		require.NoError(t, store.Commit(t.Context(), done, nil))
	})
}

// TestCommitErrorsClassified: each answer DynamoDB can give a
// TransactWriteItems, as docs/protocol.md (What a commit error proves)
// classifies it: the refusals prove that nothing was written, and are
// canceled commits; the rest leave the outcome unknown. Either way the
// record stays in progress and no staged write applies.
func TestCommitErrorsClassified(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		name := srv.table(t)
		counters := srv.counterTable(t)
		for _, tc := range []struct {
			status  int
			code    string
			refusal bool
		}{
			{400, "ValidationException", true},
			{400, "ResourceNotFoundException", true},
			{400, "UnknownOperationException", true},
			{400, "AccessDeniedException", true},
			{400, "UnrecognizedClientException", true},
			{400, "InvalidSignatureException", true},
			{400, "IncompleteSignatureException", true},
			{400, "MissingAuthenticationTokenException", true},
			{400, "SerializationException", true},
			{400, "IdempotentParameterMismatchException", false},
			{400, "TransactionInProgressException", false},
			{400, "ProvisionedThroughputExceededException", false},
			{400, "ThrottlingException", false},
			{400, "RequestLimitExceeded", false},
			{500, "InternalServerError", false},
			{503, "ServiceUnavailable", false},
		} {
			t.Run(tc.code, func(t *testing.T) {
				faults := &dynalite.Faults{}
				client := srv.NewClient(faults.Register, func(o *awsdynamodb.Options) { o.RetryMaxAttempts = 1 })
				store := newStore(t, client, name)
				rec := inProgress(wholeSecond())
				require.NoError(t, store.Put(t.Context(), rec, wholeSecond()))
				faults.AnswerError("TransactWriteItems", tc.status, tc.code, -1)
				n := "classified-" + rand.Text()
				err := store.Commit(t.Context(), completed(rec, []byte(`"x"`)), []any{increment(counters, n)})
				require.Error(t, err)
				require.NotErrorIs(t, err, persistence.ErrFenced)
				if tc.refusal {
					require.ErrorIs(t, err, persistence.ErrCommitCanceled, "%s proves that nothing was written", tc.code)
				} else {
					require.NotErrorIs(t, err, persistence.ErrCommitCanceled, "%s leaves the outcome unknown", tc.code)
				}
				assert.Equal(t, tc.code == "UnknownOperationException", errors.Is(err, persistence.ErrNoTransactions), "%v", err)
				got, err := store.Get(t.Context(), rec.Key)
				require.NoError(t, err)
				assert.Empty(t, recordtest.Diff(got, rec))
				assert.Zero(t, count(t, srv.NewClient(), counters, n))
			})
		}
	})
}

// A staged write to a table that does not exist: DynamoDB refuses the
// transaction (ResourceNotFoundException), nothing is written, and the
// commit is a canceled one, not one whose outcome is unknown.
func TestCommitToMissingTable(t *testing.T) {
	eachTransactionalServer(t, func(t *testing.T, srv server) {
		_, store, _ := srv.setup(t)
		rec := inProgress(wholeSecond())
		require.NoError(t, store.Put(t.Context(), rec, wholeSecond()))
		err := store.Commit(t.Context(), completed(rec, []byte(`"x"`)), []any{increment("NoSuchTable-"+rand.Text(), "a")})
		require.ErrorIs(t, err, persistence.ErrCommitCanceled)
		got, err := store.Get(t.Context(), rec.Key)
		require.NoError(t, err)
		assert.Empty(t, recordtest.Diff(got, rec))
	})
}
