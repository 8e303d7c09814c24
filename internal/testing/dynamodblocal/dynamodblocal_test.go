package dynamodblocal_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

func TestMain(m *testing.M) { dynamodblocal.Main(m) }

// createTable creates a table keyed by the string attribute "id", and checks
// that it is ACTIVE at once.
func createTable(ctx context.Context, client *dynamodb.Client, name string) error {
	out, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return err
	}
	if st := out.TableDescription.TableStatus; st != types.TableStatusActive {
		return fmt.Errorf("CreateTable returned a table in status %s, not ACTIVE", st)
	}
	return nil
}

type item = map[string]types.AttributeValue

func key(id string) item { return item{"id": &types.AttributeValueMemberS{Value: id}} }

func itemOf(id, v string) item {
	return item{"id": &types.AttributeValueMemberS{Value: id}, "v": &types.AttributeValueMemberS{Value: v}}
}

func get(t *testing.T, client *dynamodb.Client, table, id string) item {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: key(id), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

func TestStartAndStop(t *testing.T) {
	srv := dynamodblocal.Start(t)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, srv.Endpoint)
	require.Equal(t, "1.25.1", srv.Version, "the version scripts/install-dynamodb-local.sh pins")

	client := srv.NewClient(func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	_, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)

	require.NoError(t, srv.Stop())
	require.NoError(t, srv.Stop(), "Stop twice")
	_, err = client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.ErrorContains(t, err, "connection refused", "the server is gone")
}

// DynamoDB Local itself listens on every interface; the launcher binds it to
// the loopback interface only.
func TestListensOnLoopbackOnly(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	u, err := url.Parse(srv.Endpoint)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	require.NoError(t, conn.Close())

	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	tried := 0
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
			continue
		}
		tried++
		addr := net.JoinHostPort(ipnet.IP.String(), u.Port())
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Errorf("the server accepts connections on %s", addr)
		}
	}
	if tried == 0 {
		t.Skip("this machine has no address but loopback ones")
	}
}

// With the emulator's folder missing, Start skips the test (unless
// IDEMPOTENCY_REQUIRE_INTEGRATION=1) and says how to install it.
func TestMissingEmulatorSkips(t *testing.T) {
	t.Setenv(dynamodblocal.DirEnv, t.TempDir())
	_, err := dynamodblocal.StartContext(t.Context())
	require.ErrorIs(t, err, dynamodblocal.ErrUnavailable)
	require.ErrorContains(t, err, "make dynamodb-local")

	t.Setenv(testenv.RequireEnv, "")
	var sub *testing.T
	t.Run("Start", func(t *testing.T) {
		sub = t
		dynamodblocal.Start(t)
		t.Error("Start returned without the emulator")
	})
	require.True(t, sub.Skipped(), "Start skips the test")
}

func TestMissingJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := dynamodblocal.StartContext(t.Context())
	require.ErrorIs(t, err, dynamodblocal.ErrUnavailable)
	require.ErrorContains(t, err, "default-jre-headless")
}

// A failed conditional PutItem that asks for ALL_OLD carries the item it
// found; one that does not ask carries none.
func TestConditionalPutReturnsExistingItem(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	table := srv.NewTable(t, createTable)
	client := srv.NewClient()
	ctx := t.Context()

	first := itemOf("k", "first")
	_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: first})
	require.NoError(t, err)

	put := &dynamodb.PutItemInput{
		TableName:                           &table,
		Item:                                itemOf("k", "second"),
		ConditionExpression:                 aws.String("attribute_not_exists(id)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	_, err = client.PutItem(ctx, put)
	var ccf *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &ccf)
	require.Equal(t, first, ccf.Item)

	put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureNone
	_, err = client.PutItem(ctx, put)
	require.ErrorAs(t, err, &ccf)
	require.Empty(t, ccf.Item)

	require.Equal(t, first, get(t, client, table, "k"), "the item is unchanged")
}

func TestTransactWriteItems(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	table := srv.NewTable(t, createTable)
	client := srv.NewClient()
	ctx := t.Context()

	_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &table, Item: itemOf("a", "1")}},
		{Put: &types.Put{TableName: &table, Item: itemOf("b", "1")}},
	}})
	require.NoError(t, err)
	require.Equal(t, itemOf("a", "1"), get(t, client, table, "a"))
	require.Equal(t, itemOf("b", "1"), get(t, client, table, "b"))

	// The second put's condition fails: nothing is written, and the reasons
	// say which item failed, with the item it found.
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &table, Item: itemOf("c", "2")}},
		{Put: &types.Put{
			TableName:                           &table,
			Item:                                itemOf("a", "2"),
			ConditionExpression:                 aws.String("attribute_not_exists(id)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
	}})
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, err, &tce)
	require.Len(t, tce.CancellationReasons, 2)
	require.Equal(t, "None", aws.ToString(tce.CancellationReasons[0].Code))
	require.Empty(t, tce.CancellationReasons[0].Item)
	require.Equal(t, "ConditionalCheckFailed", aws.ToString(tce.CancellationReasons[1].Code))
	require.Equal(t, itemOf("a", "1"), tce.CancellationReasons[1].Item)

	require.Empty(t, get(t, client, table, "c"), "the cancelled transaction wrote nothing")
	require.Equal(t, itemOf("a", "1"), get(t, client, table, "a"))
}

// A transaction sent again with the same ClientRequestToken is not applied
// again; the same token with another transaction is refused.
func TestClientRequestTokenIsIdempotent(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	table := srv.NewTable(t, createTable)
	client := srv.NewClient()
	ctx := t.Context()

	token := rand.Text() // at most 36 characters, as in DynamoDB
	increment := func(id string) *dynamodb.TransactWriteItemsInput {
		return &dynamodb.TransactWriteItemsInput{
			ClientRequestToken: &token,
			TransactItems: []types.TransactWriteItem{{Update: &types.Update{
				TableName:                 &table,
				Key:                       key(id),
				UpdateExpression:          aws.String("ADD n :one"),
				ExpressionAttributeValues: item{":one": &types.AttributeValueMemberN{Value: "1"}},
			}}},
		}
	}
	for range 2 {
		_, err := client.TransactWriteItems(ctx, increment("k"))
		require.NoError(t, err)
	}
	require.Equal(t, &types.AttributeValueMemberN{Value: "1"}, get(t, client, table, "k")["n"], "applied once")

	_, err := client.TransactWriteItems(ctx, increment("other"))
	var mismatch *types.IdempotentParameterMismatchException
	require.ErrorAs(t, err, &mismatch)
	require.Empty(t, get(t, client, table, "other"))
}

// Error responses carry no x-amz-crc32 header, which the SDK's CRC32 check
// takes for a checksum of 0 and reports; NewClient's clients do not check.
func TestErrorResponsesHaveNoCRC32(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	table := srv.NewTable(t, createTable)
	ctx := t.Context()

	var mu sync.Mutex
	var headers []string // "<status> <x-amz-crc32>"
	var warnings []string
	record := func(o *dynamodb.Options) {
		o.HTTPClient = recordingClient(func(resp *http.Response) {
			mu.Lock()
			defer mu.Unlock()
			headers = append(headers, fmt.Sprintf("%d %q", resp.StatusCode, resp.Header.Get("X-Amz-Crc32")))
		})
		o.Logger = logging.LoggerFunc(func(_ logging.Classification, format string, v ...any) {
			mu.Lock()
			defer mu.Unlock()
			warnings = append(warnings, fmt.Sprintf(format, v...))
		})
	}
	failedPut := func(client *dynamodb.Client) {
		t.Helper()
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key("k")})
		require.NoError(t, err)
		_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key("k"), ConditionExpression: aws.String("attribute_not_exists(id)")})
		var ccf *types.ConditionalCheckFailedException
		require.ErrorAs(t, err, &ccf)
	}

	failedPut(dynamodb.NewFromConfig(srv.Config(), record))
	mu.Lock()
	require.Len(t, headers, 2)
	require.Regexp(t, `^200 "\d+"$`, headers[0])
	require.Equal(t, `400 ""`, headers[1])
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], "did not match expected checksum, 0,")
	warnings = nil
	mu.Unlock()

	failedPut(srv.NewClient(record))
	mu.Lock()
	require.Empty(t, warnings)
	mu.Unlock()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func recordingClient(record func(*http.Response)) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			record(resp)
		}
		return resp, err
	})}
}

// The server runs with -sharedDb: a client with other credentials and
// another region sees the same tables.
func TestOneDatabaseForAllClients(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	table := srv.NewTable(t, createTable)
	other := srv.NewClient(func(o *dynamodb.Options) {
		o.Region = "eu-west-1"
		o.Credentials = staticCredentials("SomeoneElse42")
	})
	_, err := other.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: &table})
	require.NoError(t, err)
}

// DynamoDB Local refuses an access key ID that is not made of letters and
// digits only.
func TestAccessKeyIDOfLettersAndDigits(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	for _, id := range []string{"some-one", "some_one"} {
		client := srv.NewClient(func(o *dynamodb.Options) {
			o.Credentials = staticCredentials(id)
		})
		_, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		require.ErrorContains(t, err, "UnrecognizedClientException", "access key ID %q", id)
	}
}

func TestUpdateTimeToLive(t *testing.T) {
	srv := dynamodblocal.Shared(t)
	table := srv.NewTable(t, createTable)
	client := srv.NewClient()
	_, err := client.UpdateTimeToLive(t.Context(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires"), Enabled: aws.Bool(true)},
	})
	require.NoError(t, err)
	out, err := client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	require.NoError(t, err)
	require.Equal(t, types.TimeToLiveStatusEnabled, out.TimeToLiveDescription.TimeToLiveStatus)
	require.Equal(t, "expires", aws.ToString(out.TimeToLiveDescription.AttributeName))
}

// staticCredentials returns credentials with the access key ID id.
func staticCredentials(id string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: id, SecretAccessKey: "secret", Source: "test"}, nil
	})
}
