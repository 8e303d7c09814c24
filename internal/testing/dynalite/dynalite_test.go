package dynalite_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

func TestMain(m *testing.M) { dynalite.Main(m) }

func TestStartAndStop(t *testing.T) {
	if os.Getenv(dynalite.EndpointEnv) != "" {
		t.Skip("an external endpoint is configured")
	}
	srv := dynalite.Start(t)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, srv.Endpoint)
	require.Equal(t, "4.0.0", srv.Version, "the version package.json pins")
	require.False(t, srv.External)

	_, err := srv.NewClient().ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)

	require.NoError(t, srv.Stop())
	require.NoError(t, srv.Stop(), "Stop twice")
	u, err := url.Parse(srv.Endpoint)
	require.NoError(t, err)
	_, err = net.Dial("tcp", u.Host)
	require.Error(t, err, "the server is gone")
}

// A client that gives up in the middle of sending a request (its context
// expired) must not take the server down: dynalite rethrows the error of an
// aborted request, which would end the process.
func TestSurvivesAbortedRequests(t *testing.T) {
	srv := dynalite.Start(t)
	if srv.External {
		t.Skip("an external endpoint is configured")
	}
	u, err := url.Parse(srv.Endpoint)
	require.NoError(t, err)
	client := srv.NewClient()
	for range 3 {
		conn, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"+
			"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 100\r\n\r\n{\"Lim", u.Host)
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		// The server handles the aborted request as soon as it sees the
		// connection close; give it the chance to fail before asking again.
		for range 20 {
			time.Sleep(5 * time.Millisecond)
			_, err = client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
			require.NoError(t, err, "the server died after an aborted request")
		}
	}
}

// Two servers in one process (as in two test binaries) get ports of their
// own and do not share data.
func TestServersAreIndependent(t *testing.T) {
	a, b := dynalite.Shared(t), dynalite.Start(t)
	if a.External {
		t.Skip("an external endpoint is configured")
	}
	require.NotEqual(t, a.Endpoint, b.Endpoint)
	name := dynalite.TableName(t)
	_, err := a.NewClient().CreateTable(t.Context(), tableInput(name))
	require.NoError(t, err)
	out, err := b.NewClient().ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	require.NotContains(t, out.TableNames, name)
}

func tableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            &name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}
}

func TestEnv(t *testing.T) {
	srv := dynalite.Shared(t)
	require.Contains(t, srv.Env(), dynalite.EndpointEnv+"="+srv.Endpoint)
}

func TestTableName(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		name := dynalite.TableName(t)
		require.Regexp(t, `^[a-zA-Z0-9_.-]{3,255}$`, name)
		require.False(t, seen[name])
		seen[name] = true
	}
	t.Run("a/very/long name with spaces and ünïcode "+string(make([]byte, 300)), func(t *testing.T) {
		require.Regexp(t, `^[a-zA-Z0-9_.-]{3,255}$`, dynalite.TableName(t))
	})
}

func TestCounter(t *testing.T) {
	srv := dynalite.Shared(t)
	var counter dynalite.Counter
	faults := &dynalite.Faults{}
	client := srv.NewClient(counter.Register, faults.Register)
	require.Equal(t, "no calls", counter.String())

	_, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	faults.LoseReply("ListTables", 1)
	_, err = client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	require.NoError(t, err)
	_, err = client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("missing-table")})
	require.Error(t, err)

	require.Equal(t, 2, counter.Calls("ListTables"))
	require.Equal(t, 3, counter.Attempts("ListTables"), "one retry after the lost reply")
	require.Equal(t, 3, counter.Calls())
	require.Equal(t, 3, counter.Calls("ListTables", "DescribeTable"))
	require.Equal(t, map[string]int{"ListTables": 2, "DescribeTable": 1}, counter.Snapshot())
	require.Equal(t, "DescribeTable=1 ListTables=2", counter.String())
	counter.Reset()
	require.Zero(t, counter.Calls())
	require.Zero(t, counter.Attempts())
}

func TestCounterIsSafeForConcurrentUse(t *testing.T) {
	srv := dynalite.Shared(t)
	var counter dynalite.Counter
	var wg sync.WaitGroup
	for range 8 {
		client := srv.NewClient(counter.Register)
		wg.Go(func() {
			for range 5 {
				_, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 40, counter.Calls("ListTables"))
}

func TestFaults(t *testing.T) {
	srv := dynalite.Shared(t)

	t.Run("LostReplyReachesTheServer", func(t *testing.T) {
		faults := &dynalite.Faults{}
		var counter dynalite.Counter
		client := srv.NewClient(faults.Register, counter.Register)
		faults.LoseReply("CreateTable", 1)
		_, err := client.CreateTable(t.Context(), tableInput(dynalite.TableName(t)))
		// The first attempt created the table; the retry finds it.
		var inUse *types.ResourceInUseException
		require.ErrorAs(t, err, &inUse)
		require.Equal(t, 1, faults.Fired(dynalite.LostReply))
		require.Equal(t, 2, counter.Attempts("CreateTable"))
	})

	t.Run("Throttled", func(t *testing.T) {
		faults := &dynalite.Faults{}
		var counter dynalite.Counter
		client := srv.NewClient(faults.Register, counter.Register)
		faults.Throttle("ListTables", -1)
		_, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		var throttled *types.ProvisionedThroughputExceededException
		require.ErrorAs(t, err, &throttled)
		require.Equal(t, 3, counter.Attempts("ListTables"), "the SDK retries throttling")
		require.Equal(t, 3, faults.Fired(dynalite.Throttled))

		// Other operations pass; after Clear, so does this one.
		_, err = client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("missing-table")})
		var missing *types.ResourceNotFoundException
		require.ErrorAs(t, err, &missing)
		faults.Clear()
		_, err = client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		require.NoError(t, err)
	})

	t.Run("ForwardedLateReachesTheServerAfterTheRetry", func(t *testing.T) {
		faults := &dynalite.Faults{}
		var counter dynalite.Counter
		client := srv.NewClient(faults.Register, counter.Register)
		table := srv.NewTable(t, func(ctx context.Context, client *dynamodb.Client, name string) error {
			if _, err := client.CreateTable(ctx, tableInput(name)); err != nil {
				return err
			}
			return dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
				o.MinDelay = 10 * time.Millisecond
			}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute)
		})
		item := func(v string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}, "v": &types.AttributeValueMemberS{Value: v}}
		}
		faults.Add("PutItem", dynalite.ForwardedLate, 1)
		_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item("first")})
		require.NoError(t, err, "the retry gets through")
		require.Equal(t, 2, counter.Attempts("PutItem"))
		require.Equal(t, 1, faults.Fired(dynalite.ForwardedLate))
		_, err = client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item("second")})
		require.NoError(t, err)

		held := faults.TakeHeld()
		require.Len(t, held, 1)
		require.Equal(t, "PutItem", held[0].Op)
		require.Empty(t, faults.TakeHeld())
		require.NoError(t, held[0].Forward(t.Context()))
		out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table,
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}}, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Equal(t, &types.AttributeValueMemberS{Value: "first"}, out.Item["v"], "the held attempt overwrote the later write")

		// A conditional request forwarded late is judged when it arrives.
		var got *dynalite.HeldRequest
		faults.OnHold = func(_ context.Context, h *dynalite.HeldRequest) { got = h }
		faults.Add("DeleteItem", dynalite.ForwardedLate, 1)
		_, err = client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: &table,
			Key:                 map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}},
			ConditionExpression: aws.String("attribute_exists(id)")})
		require.NoError(t, err)
		require.NotNil(t, got, "OnHold took it")
		require.Empty(t, faults.TakeHeld())
		err = got.Forward(t.Context())
		var reply *dynalite.ReplyError
		require.ErrorAs(t, err, &reply)
		require.Equal(t, "ConditionalCheckFailedException", reply.Type)
		require.Equal(t, 400, reply.Status)
		require.Equal(t, err, got.Forward(t.Context()), "forwarded once")
	})

	t.Run("RefusedOnce", func(t *testing.T) {
		faults := &dynalite.Faults{}
		var counter dynalite.Counter
		client := srv.NewClient(faults.Register, counter.Register)
		faults.Refuse("", 1)
		_, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		require.NoError(t, err, "the retry gets through")
		require.Equal(t, 2, counter.Attempts())
		require.Equal(t, 1, faults.Fired(dynalite.Refused))

		faults.Refuse("", -1)
		_, err = client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		require.ErrorIs(t, err, dynalite.ErrInjected)
		require.ErrorContains(t, err, "connection refused")
	})
}

func TestUnavailable(t *testing.T) {
	if os.Getenv(dynalite.EndpointEnv) != "" {
		t.Skip("an external endpoint is configured")
	}
	t.Setenv("PATH", t.TempDir())
	_, err := dynalite.StartContext(t.Context())
	require.ErrorIs(t, err, dynalite.ErrUnavailable)
	require.ErrorContains(t, err, "Node.js")

	// Start skips, or fails when integration tests are required.
	for _, require_ := range []string{"", "1"} {
		t.Setenv(testenv.RequireEnv, require_)
		tb := &recordingTB{TB: t}
		tb.run(func() { dynalite.Start(tb) })
		if require_ == "1" {
			require.True(t, tb.failed, "%s=1: a missing server fails the test", testenv.RequireEnv)
		} else {
			require.True(t, tb.skipped, "a missing server skips the test")
			require.Regexp(t, regexp.MustCompile(`Node\.js.*IDEMPOTENCY_REQUIRE_INTEGRATION=1`), tb.msg)
		}
	}
}

func TestRepoRootHasPackageLock(t *testing.T) {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	for _, f := range []string{"go.mod", "package.json", "package-lock.json"} {
		_, err := os.Stat(root + "/" + f)
		require.NoError(t, err, f)
	}
}

// recordingTB records Skip and Fatal instead of ending the test.
type recordingTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordingTB) Helper()                  {}
func (r *recordingTB) Context() context.Context { return context.Background() }
func (r *recordingTB) Skipf(format string, a ...any) {
	r.skipped = true
	r.msg = fmt.Sprintf(format, a...)
	runtime.Goexit()
}
func (r *recordingTB) Fatal(a ...any) { r.failed = true; r.msg = fmt.Sprint(a...); runtime.Goexit() }
func (r *recordingTB) Fatalf(format string, a ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

func (r *recordingTB) run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}
