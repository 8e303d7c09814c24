package dynamodb_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// BenchmarkSDKCompare is `make compare`'s SDK floor without the network:
// the harness's API Gateway event and key (powertools_json(body).order_id),
// an invocation's deadline, and its floor's requests (sdkFloor in
// bench/compare/driver.go), next to the wrapped handler, through the SDK's
// real client against an HTTP client that answers in the process. The
// sides alternate call by call (see ratio); cpu-ratio is the library's over
// the floor's, and the A/A sub-benchmarks put the floor against itself.
//
// A replay's answer is the stored item, in the body of the failed
// condition. The library's carries the owner token and the in-progress
// expiry, and for this event its response is 565 bytes against the
// floor's 469. The store reads that body once (errorProtocol), and the
// floor's request goes through the SDK's three reads of it, each into
// buffers that grow past 512 bytes; ReplayEqualResponses pads the floor's
// item to the library's size.
//
//	go test -run '^$' -bench SDKCompare -benchtime 20000x ./persistence/dynamodb/
func BenchmarkSDKCompare(b *testing.B) {
	raw, err := os.ReadFile("../../bench/compare/testdata/event.json")
	if err != nil {
		b.Fatal(err)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		b.Fatal(err)
	}
	respond := func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"payment_id":"pay_123","status":"created"}`}, nil
	}
	newClient := func(c *cannedHTTP) *awsdynamodb.Client {
		return awsdynamodb.New(awsdynamodb.Options{Region: "us-east-1", Credentials: dynalite.Credentials, BaseEndpoint: aws.String("http://127.0.0.1:8000"), HTTPClient: c})
	}
	wrap := func(client *awsdynamodb.Client, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		store, err := dynamodb.New(client, "idempotency")
		if err != nil {
			b.Fatal(err)
		}
		wrapped, err := idempotency.Wrap(h, store, idempotency.WithKey("powertools_json(body).order_id"), idempotency.WithKeyPrefix("orders"))
		if err != nil {
			b.Fatal(err)
		}
		return wrapped
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	table := "idempotency"

	// The floor's requests.
	floorKey := func() map[string]types.AttributeValue {
		sum := sha256.Sum256([]byte(ev.Body))
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "orders#" + hex.EncodeToString(sum[:])}}
	}
	floorPut := func(c *awsdynamodb.Client) error {
		item := floorKey()
		item["status"] = &types.AttributeValueMemberS{Value: "INPROGRESS"}
		item["expiration"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}
		_, err := c.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: &table, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)"), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		return err
	}
	client := newClient(&cannedHTTP{})
	floorFirst := func() {
		if err := floorPut(client); err != nil {
			b.Fatal(err)
		}
		resp, _ := respond(ctx, ev)
		data, err := json.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := client.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
			TableName: &table, Key: floorKey(), UpdateExpression: aws.String("SET #s = :s, #d = :d"),
			ExpressionAttributeNames:  map[string]string{"#s": "status", "#d": "data"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "COMPLETED"}, ":d": &types.AttributeValueMemberS{Value: string(data)}},
		}); err != nil {
			b.Fatal(err)
		}
	}
	// The canned server completes every reservation: each call is a first
	// call.
	libFirst := wrap(client, respond)

	// Replays answer with the stored items, the library's as its store
	// writes them.
	var key string
	first := wrap(client, func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		key, _ = idempotency.KeyFromContext(ctx)
		return respond(ctx, ev)
	})
	if _, err := first(ctx, ev); err != nil {
		b.Fatal(err)
	}
	resp, _ := respond(ctx, ev)
	data, _ := json.Marshal(resp)
	now := time.Now()
	expiry := `"expiration":{"N":"` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `"},`
	conflict := func(item string) string {
		return `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{` +
			`"id":{"S":"` + key + `"},` + expiry + item + `"status":{"S":"COMPLETED"},"data":{"S":` + strconv.Quote(string(data)) + `}}}`
	}
	libItem := `"in_progress_expiration":{"N":"` + strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10) + `"},"owner_token":{"S":"QGZWM5GVFV3PZ4LSYUBE4RK7WA"},`
	libReplay := wrap(newClient(&cannedHTTP{conflict: conflict(libItem)}), respond)
	padded := `"pad":{"S":"` + strings.Repeat("x", len(libItem)-len(`"pad":{"S":""},`)) + `"},`
	replay := func(c *awsdynamodb.Client) func() {
		return func() {
			err := floorPut(c)
			var failed *types.ConditionalCheckFailedException
			if !errors.As(err, &failed) {
				b.Fatal(err)
			}
			var r events.APIGatewayProxyResponse
			if err := json.Unmarshal([]byte(failed.Item["data"].(*types.AttributeValueMemberS).Value), &r); err != nil {
				b.Fatal(err)
			}
		}
	}
	floorReplay := replay(newClient(&cannedHTTP{conflict: conflict("")}))
	floorReplayPadded := replay(newClient(&cannedHTTP{conflict: conflict(padded)}))

	lib := func(f func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)) func() {
		return func() {
			if r, err := f(ctx, ev); err != nil || r.StatusCode != 201 {
				b.Fatal(r, err)
			}
		}
	}
	b.Run("FirstCall", func(b *testing.B) { ratio(b, floorFirst, lib(libFirst), nil) })
	b.Run("Replay", func(b *testing.B) { ratio(b, floorReplay, lib(libReplay), nil) })
	b.Run("ReplayEqualResponses", func(b *testing.B) { ratio(b, floorReplayPadded, lib(libReplay), nil) })
	b.Run("FirstCallAA", func(b *testing.B) { ratio(b, floorFirst, floorFirst, nil) })
	b.Run("ReplayAA", func(b *testing.B) { ratio(b, floorReplay, floorReplay, nil) })
}
