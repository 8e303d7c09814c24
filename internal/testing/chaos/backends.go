package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	goredis "github.com/redis/go-redis/v9"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	"github.com/retrysafe/retrysafe/internal/testing/redisserver"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
	redisstore "github.com/retrysafe/retrysafe/persistence/redis"
)

// Memory is a backend over one in-process memory.Store shared by every
// environment. It has no disruptions; it is the fast run, and the reference
// for the others.
func Memory() Backend {
	return &memoryBackend{store: memory.New(func(o *memory.Options) { o.MaxResponseSize = ResponseLimit })}
}

type memoryBackend struct{ store *memory.Store }

func (b *memoryBackend) Name() string                             { return "memory" }
func (b *memoryBackend) NewStore(*Env) (persistence.Store, error) { return b.store, nil }
func (b *memoryBackend) Disruptions() []Disruption                { return nil }

// DynamoDB is a backend over a dynalite server started for tb, with a table
// of its own. Each environment has its own SDK client and HTTP connections;
// HTTP faults are injected under the SDK, which retries them. Its
// disruption is a burst of throttling: every request of every environment
// is answered ProvisionedThroughputExceededException for a while. dynalite
// ignores ALL_OLD, so every conflict is read with a Get.
func DynamoDB(tb testing.TB) Backend {
	tb.Helper()
	return newDynamoBackend(tb, dynamotest.Dynalite, "dynamodb")
}

// DynamoDBLocal is the DynamoDB backend over DynamoDB Local, which
// returns the existing record with a failed reservation (ALL_OLD), as
// DynamoDB does: conflicts take no Get.
func DynamoDBLocal(tb testing.TB) Backend {
	tb.Helper()
	return newDynamoBackend(tb, dynamotest.DynamoDBLocal, "dynamodb-local")
}

// DynamoDBLocalTransactions is the DynamoDB Local backend in
// transactional mode (a TransactionalBackend): the handler's side effect
// is an item it stages (dynamodb.Stage), which commits with the completion
// of its key (idempotency.WithTransactions) or not at all.
func DynamoDBLocalTransactions(tb testing.TB) Backend {
	tb.Helper()
	b := newDynamoBackend(tb, dynamotest.DynamoDBLocal, "dynamodb-local-tx")
	b.effects = dynalite.TableName(tb) + "-effects"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.srv.NewClient().CreateTable(ctx, &awsdynamodb.CreateTableInput{
		TableName: &b.effects,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(effectKeyAttr), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(effectInvAttr), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(effectKeyAttr), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(effectInvAttr), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		tb.Fatal(err)
	}
	b.reader = b.srv.NewClient()
	return b
}

func newDynamoBackend(tb testing.TB, kind *dynamotest.Kind, name string) *dynamoBackend {
	tb.Helper()
	srv := kind.Start(tb)
	table := dynalite.TableName(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamodb.CreateTable(ctx, srv.NewClient(), table); err != nil {
		tb.Fatal(err)
	}
	return &dynamoBackend{name: name, srv: srv, table: table}
}

type dynamoBackend struct {
	name          string
	srv           *dynamotest.Server
	table         string
	throttleUntil atomic.Int64 // UnixNano

	// effects, in transactional mode, is the table of side effects: one
	// item per committed side effect, by client key and invocation; reader
	// reads it, with no faults.
	effects string
	reader  *awsdynamodb.Client
}

// The attributes of an item of the side-effects table.
const (
	effectKeyAttr    = "key"
	effectInvAttr    = "inv"
	effectAnswerAttr = "answer"
)

// Transactional implements TransactionalBackend.
func (b *dynamoBackend) Transactional() bool { return b.effects != "" }

// StageEffect implements TransactionalBackend: the item of the side effect
// of invocation inv on key, staged in the completion of inv's reservation.
func (b *dynamoBackend) StageEffect(ctx context.Context, key, inv, answer string) error {
	return dynamodb.Stage(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName: &b.effects,
		Item: map[string]types.AttributeValue{
			effectKeyAttr:    &types.AttributeValueMemberS{Value: key},
			effectInvAttr:    &types.AttributeValueMemberS{Value: inv},
			effectAnswerAttr: &types.AttributeValueMemberS{Value: answer},
		},
	}})
}

// CommittedEffects implements TransactionalBackend, with a consistent
// query of the side-effects table.
func (b *dynamoBackend) CommittedEffects(ctx context.Context, key string) (map[string]string, error) {
	committed := map[string]string{}
	p := awsdynamodb.NewQueryPaginator(b.reader, &awsdynamodb.QueryInput{
		TableName:                 &b.effects,
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#k = :k"),
		ExpressionAttributeNames:  map[string]string{"#k": effectKeyAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: key}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			inv, _ := item[effectInvAttr].(*types.AttributeValueMemberS)
			answer, _ := item[effectAnswerAttr].(*types.AttributeValueMemberS)
			if inv == nil || answer == nil {
				return nil, fmt.Errorf("chaos: side-effects item of key %q without %s or %s", key, effectInvAttr, effectAnswerAttr)
			}
			committed[inv.Value] = answer.Value
		}
	}
	return committed, nil
}

func (b *dynamoBackend) Name() string { return b.name }

func (b *dynamoBackend) NewStore(env *Env) (persistence.Store, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	transport := &throttleBurst{b: b, env: env, next: env.HTTPTransport(base)}
	client := b.srv.NewClient(func(o *awsdynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: transport}
	})
	return dynamodb.New(client, b.table, func(o *dynamodb.Options) {
		o.MaxItemSize = ResponseLimit
	})
}

func (b *dynamoBackend) Disruptions() []Disruption {
	return []Disruption{{
		Kind: faultThrottleBurst,
		Do: func(rng *rand.Rand) {
			d := 50*time.Millisecond + time.Duration(rng.Int64N(int64(250*time.Millisecond)))
			b.throttleUntil.Store(time.Now().Add(d).UnixNano())
			time.Sleep(d)
		},
	}}
}

// throttleBurst throttles every request during a burst.
type throttleBurst struct {
	b    *dynamoBackend
	env  *Env
	next http.RoundTripper
}

func (t *throttleBurst) RoundTrip(req *http.Request) (*http.Response, error) {
	if time.Now().UnixNano() < t.b.throttleUntil.Load() {
		t.env.h.count("http_throttled_in_burst")
		f := &dynalite.Faults{Base: t.next}
		f.Throttle("", 1)
		return f.RoundTrip(req)
	}
	return t.next.RoundTrip(req)
}

// Redis is a backend over a redis-server started for tb. Each environment
// has its own go-redis client, which honours the invocation's deadline.
// Store faults are injected at the Store (faultstore). Its disruptions are
// a restart, which loses every record (redis-server runs without
// persistence, like a failover to a replica that had not received them),
// and a stall (SIGSTOP, then SIGCONT), during which requests time out but
// may still be applied later.
func Redis(tb testing.TB) Backend {
	tb.Helper()
	return &redisBackend{srv: redisserver.Start(tb)}
}

type redisBackend struct{ srv *redisserver.Server }

func (b *redisBackend) Name() string { return "redis" }

func (b *redisBackend) NewStore(*Env) (persistence.Store, error) {
	client := b.srv.NewClient(func(o *goredis.Options) {
		o.ContextTimeoutEnabled = true
		o.DialTimeout = 200 * time.Millisecond
		o.ReadTimeout = 200 * time.Millisecond
		o.WriteTimeout = 200 * time.Millisecond
		o.PoolSize = 8
	})
	return redisstore.New(client, func(o *redisstore.Options) {
		o.MaxResponseSize = ResponseLimit
	})
}

func (b *redisBackend) Disruptions() []Disruption {
	return []Disruption{
		{Kind: faultRestart, DataLoss: true, Do: func(*rand.Rand) { b.srv.Restart() }},
		{Kind: faultStall, Do: func(rng *rand.Rand) {
			b.srv.Freeze()
			time.Sleep(50*time.Millisecond + time.Duration(rng.Int64N(int64(250*time.Millisecond))))
			b.srv.Thaw()
		}},
	}
}
