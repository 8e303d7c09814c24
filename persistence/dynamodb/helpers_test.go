package dynamodb_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func TestMain(m *testing.M) { dynalite.Main(m) }

// table creates a table for a store with optFns on the shared server and
// returns its name. Tables on an external endpoint are deleted afterwards;
// dynalite's vanish with it.
func table(t testing.TB, srv *dynalite.Server, optFns ...func(*dynamodb.Options)) string {
	t.Helper()
	return srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
		return dynamodb.CreateTable(ctx, client, name, optFns...)
	})
}

// setup returns the shared server, a fresh table on it, and a store on that
// table using a client of its own with a request counter.
func setup(t testing.TB, optFns ...func(*dynamodb.Options)) (*dynalite.Server, string, *dynamodb.Store, *dynalite.Counter) {
	t.Helper()
	srv := dynalite.Shared(t)
	name := table(t, srv, optFns...)
	counter := &dynalite.Counter{}
	return srv, name, newStore(t, srv.NewClient(counter.Register), name, optFns...), counter
}

func newStore(t testing.TB, client dynamodb.Client, table string, optFns ...func(*dynamodb.Options)) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.New(client, table, optFns...)
	require.NoError(t, err)
	return s
}

// allOldClient is a fake Client that behaves as DynamoDB does when a PutItem
// asks for ReturnValuesOnConditionCheckFailure ALL_OLD: the
// ConditionalCheckFailedException carries the existing item. It delegates
// every call to Client (dynalite, which ignores ALL_OLD), and when a
// condition fails it reads the item with peek, a client that is not counted,
// so that request counts are those DynamoDB would see. The read is not
// atomic with the failed write, which is good enough for tests that do not
// race on the key.
type allOldClient struct {
	dynamodb.Client
	peek     *awsdynamodb.Client
	keyAttrs []string
}

func (c *allOldClient) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	out, err := c.Client.PutItem(ctx, in, optFns...)
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) && failed.Item == nil &&
		in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
		key := make(map[string]types.AttributeValue, len(c.keyAttrs))
		for _, a := range c.keyAttrs {
			key[a] = in.Item[a]
		}
		consistent := true
		got, gerr := c.peek.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: in.TableName, Key: key, ConsistentRead: &consistent})
		if gerr != nil {
			return nil, gerr
		}
		failed.Item = got.Item
	}
	return out, err
}

// withAllOld wraps client in an allOldClient for a table with the default
// key schema (or keyAttrs).
func withAllOld(srv *dynalite.Server, client dynamodb.Client, keyAttrs ...string) *allOldClient {
	if len(keyAttrs) == 0 {
		keyAttrs = []string{"id"}
	}
	return &allOldClient{Client: client, peek: srv.NewClient(), keyAttrs: keyAttrs}
}

// serverReturnsOldItem reports whether the server returns the existing item
// on a failed PutItem condition when asked to (DynamoDB, recent DynamoDB
// Local), or ignores the request (dynalite).
func serverReturnsOldItem(t testing.TB, srv *dynalite.Server, table string) bool {
	t.Helper()
	if !srv.External {
		return false
	}
	c := srv.NewClient()
	item := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "probe#" + rand.Text()}}
	_, err := c.PutItem(t.Context(), &awsdynamodb.PutItemInput{TableName: &table, Item: item})
	require.NoError(t, err)
	cond := "attribute_not_exists(id)"
	_, err = c.PutItem(t.Context(), &awsdynamodb.PutItemInput{
		TableName: &table, Item: item, ConditionExpression: &cond,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &failed)
	return len(failed.Item) > 0
}

// inProgress returns a new in-progress record for a fresh key, reserved at
// now (a whole second) until an hour later, in progress for 30 s.
func inProgress(now time.Time) *persistence.Record {
	return &persistence.Record{
		Key:                 "test#" + rand.Text(),
		Status:              persistence.StatusInProgress,
		ExpiresAt:           now.Add(time.Hour),
		InProgressExpiresAt: now.Add(30 * time.Second),
		PayloadHash:         "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
		Token:               rand.Text(),
	}
}

func completed(rec *persistence.Record, response []byte) *persistence.Record {
	c := *rec
	c.Status = persistence.StatusCompleted
	c.Response = response
	return &c
}

func wholeSecond() time.Time { return time.Now().Truncate(time.Second) }

// rawItem reads the item for key directly, bypassing the store.
func rawItem(t testing.TB, srv *dynalite.Server, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	consistent := true
	out, err := srv.NewClient().GetItem(t.Context(), &awsdynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: &consistent})
	require.NoError(t, err)
	return out.Item
}

func idKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}}
}
