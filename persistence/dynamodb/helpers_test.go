package dynamodb_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// server is a DynamoDB-compatible server the tests run against, dynalite or
// DynamoDB Local (see internal/testing/dynamotest for what each lacks), with
// the helpers the tests share.
type server struct{ *dynamotest.Server }

// eachServer runs f against the shared server of each kind, in a subtest
// named after the kind ("dynalite", "dynamodb-local"). A kind that is not
// installed skips its subtest, with the reason (fails it with
// IDEMPOTENCY_REQUIRE_INTEGRATION=1).
func eachServer(t *testing.T, f func(t *testing.T, srv server)) {
	t.Helper()
	for _, kind := range dynamotest.Kinds {
		t.Run(kind.Name, func(t *testing.T) { f(t, server{kind.Shared(t)}) })
	}
}

// table creates a table for a store with optFns on the server and returns
// its name. It has no time to live: DynamoDB Local deletes an expired
// item about a second after its expiry (DynamoDB within days), and the
// tests that set up an expired record must find it there.
func (srv server) table(t testing.TB, optFns ...func(*dynamodb.Options)) string {
	t.Helper()
	return srv.NewTable(t, func(ctx context.Context, client *awsdynamodb.Client, name string) error {
		if err := dynamodb.CreateTable(ctx, client, name, optFns...); err != nil {
			return err
		}
		disabled := false
		_, err := client.UpdateTimeToLive(ctx, &awsdynamodb.UpdateTimeToLiveInput{
			TableName: &name,
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(dynamodb.ExpiryAttr(optFns...)),
				Enabled:       &disabled,
			},
		})
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnknownOperationException" {
			return nil // dynalite: no time to live at all
		}
		return err
	})
}

// setup returns a fresh table on the server, and a store on that table
// using a client of its own with a request counter.
func (srv server) setup(t testing.TB, optFns ...func(*dynamodb.Options)) (string, *dynamodb.Store, *dynalite.Counter) {
	t.Helper()
	name := srv.table(t, optFns...)
	counter := &dynalite.Counter{}
	return name, newStore(t, srv.NewClient(counter.Register), name, optFns...), counter
}

func newStore(t testing.TB, client dynamodb.Client, table string, optFns ...func(*dynamodb.Options)) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.New(client, table, optFns...)
	require.NoError(t, err)
	return s
}

// withAllOld returns client as it is on a server that returns the existing
// item with a failed condition (ReturnsOldItem: DynamoDB Local), and on
// one that does not (dynalite) an allOldClient around it that emulates
// DynamoDB, for a table with the default key schema (or keyAttrs).
func (srv server) withAllOld(client dynamodb.Client, keyAttrs ...string) dynamodb.Client {
	if srv.ReturnsOldItem {
		return client
	}
	if len(keyAttrs) == 0 {
		keyAttrs = []string{"id"}
	}
	return &allOldClient{Client: client, peek: srv.NewClient(), keyAttrs: keyAttrs}
}

// allOldModes are the ways a failed reservation reaches the store on the
// server: without the existing item and with it (emulated) on dynalite,
// with it (from the server) on DynamoDB Local.
func (srv server) allOldModes() []bool {
	if srv.ReturnsOldItem {
		return []bool{true}
	}
	return []bool{false, true}
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

// Query and Scan pass through, for List.
func (c *allOldClient) Query(ctx context.Context, in *awsdynamodb.QueryInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.QueryOutput, error) {
	return c.peek.Query(ctx, in, optFns...)
}

func (c *allOldClient) Scan(ctx context.Context, in *awsdynamodb.ScanInput, optFns ...func(*awsdynamodb.Options)) (*awsdynamodb.ScanOutput, error) {
	return c.peek.Scan(ctx, in, optFns...)
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

// closedClient returns a client of a server that is down: its endpoint is
// a loopback port that nothing listens on.
func closedClient(t testing.TB) *awsdynamodb.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	return awsdynamodb.NewFromConfig(dynalite.LocalConfig(endpoint))
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

// layouts are the two places of a record's key in a table: the partition
// key, or the sort key under a static partition key.
var layouts = []struct {
	name   string
	optFns []func(*dynamodb.Options)
}{
	{"PartitionKey", nil},
	{"SortKey", []func(*dynamodb.Options){func(o *dynamodb.Options) { o.SortKeyAttr, o.StaticPKValue = "sk", "idempotency#orders" }}},
}

func wholeSecond() time.Time { return time.Now().Truncate(time.Second) }

// rawItem reads the item for key directly, bypassing the store.
func (srv server) rawItem(t testing.TB, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	consistent := true
	out, err := srv.NewClient().GetItem(t.Context(), &awsdynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: &consistent})
	require.NoError(t, err)
	return out.Item
}

func idKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}}
}
