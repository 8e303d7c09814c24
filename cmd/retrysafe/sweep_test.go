package main

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamotest"
	ddbstore "github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// dynamoProxy stands between the command and a DynamoDB server. It counts
// the operations it forwards, answers those in deny with
// AccessDeniedException, and, with consistency set, rewrites
// DescribeTable's answer into a global table's: neither dynalite nor
// DynamoDB Local can make one.
type dynamoProxy struct {
	URL string

	consistency types.MultiRegionConsistency
	deny        string

	mu  sync.Mutex
	ops map[string]int
}

func newDynamoProxy(t *testing.T, endpoint string, consistency types.MultiRegionConsistency, deny string) *dynamoProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	require.NoError(t, err)
	p := &dynamoProxy{consistency: consistency, deny: deny, ops: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // as signed
			r.Out.Header.Set("Accept-Encoding", "identity")
		},
		ModifyResponse: p.rewrite,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := operation(r)
		p.mu.Lock()
		p.ops[op]++
		p.mu.Unlock()
		if op == p.deny {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#AccessDeniedException","message":"not authorized to perform: dynamodb:`+op+`"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// operation returns the DynamoDB operation of a request, such as "Scan".
func operation(r *http.Request) string {
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	return op
}

// rewrite makes DescribeTable's answer list replicas in two other Regions,
// with the proxy's consistency, and sets its checksum.
func (p *dynamoProxy) rewrite(resp *http.Response) error {
	if p.consistency == "" || operation(resp.Request) != "DescribeTable" || resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var out map[string]map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		return err
	}
	out["Table"]["MultiRegionConsistency"] = p.consistency
	out["Table"]["Replicas"] = []map[string]string{
		{"RegionName": "us-east-2", "ReplicaStatus": "ACTIVE"},
		{"RegionName": "us-west-2", "ReplicaStatus": "ACTIVE"},
	}
	if body, err = json.Marshal(out); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	return nil
}

// calls returns how many requests of the operations the proxy forwarded.
func (p *dynamoProxy) calls(ops ...string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, op := range ops {
		n += p.ops[op]
	}
	return n
}

// dynamoSweepFixture creates a table on srv with time to live on the
// attribute ttl, off for "", where the server has it (DynamoDB Local;
// dynalite has none), and points the command at srv through a proxy
// that describes the table as of consistency and refuses deny.
func dynamoSweepFixture(t *testing.T, srv *dynamotest.Server, ttl string, consistency types.MultiRegionConsistency, deny string) (*fixture, *dynamoProxy) {
	t.Helper()
	table := srv.NewTable(t, func(ctx context.Context, c *awsdynamodb.Client, name string) error {
		if err := ddbstore.CreateTable(ctx, c, name); err != nil { // TTL on expiration
			return err
		}
		if ttl == "expiration" || srv.Kind == dynamotest.Dynalite {
			return nil
		}
		specs := []types.TimeToLiveSpecification{{AttributeName: aws.String("expiration"), Enabled: aws.Bool(false)}}
		if ttl != "" {
			specs = append(specs, types.TimeToLiveSpecification{AttributeName: &ttl, Enabled: aws.Bool(true)})
		}
		for _, spec := range specs {
			if _, err := c.UpdateTimeToLive(ctx, &awsdynamodb.UpdateTimeToLiveInput{TableName: &name, TimeToLiveSpecification: &spec}); err != nil {
				return err
			}
		}
		return nil
	})
	s, err := ddbstore.New(srv.NewClient(), table)
	require.NoError(t, err)
	awsEnvOf(t, srv.Env())
	proxy := newDynamoProxy(t, srv.Endpoint, consistency, deny)
	t.Setenv(dynalite.EndpointEnv, proxy.URL)
	return &fixture{name: "DynamoDB", store: s, flags: []string{"--table", table}, shown: "DynamoDB table"}, proxy
}

// sweep deletes the expired records of a DynamoDB table that DynamoDB does
// not delete itself: a global table of strong consistency (MRSC), which
// has no time to live, and a table whose time to live is off or on
// another attribute. It keeps the others, a stuck record among them
// (in progress past its in-progress expiry, not expired), which its call
// may still complete.
func TestSweepDynamoDB(t *testing.T) {
	local := []*dynamotest.Kind{dynamotest.DynamoDBLocal}
	for _, tc := range []struct {
		name        string
		kinds       []*dynamotest.Kind
		ttl         string
		consistency types.MultiRegionConsistency
		deny        string
		note        string // on stderr
	}{
		// On DynamoDB Local, with time to live on the expiry attribute as
		// CreateTable makes it: an MRSC table is swept whatever
		// DescribeTimeToLive says.
		{name: "MRSC", kinds: dynamotest.Kinds, ttl: "expiration", consistency: types.MultiRegionConsistencyStrong},
		{name: "no time to live", kinds: dynamotest.Kinds},
		{name: "no time to live, MREC", kinds: dynamotest.Kinds, consistency: types.MultiRegionConsistencyEventual},
		{name: "time to live on another attribute", kinds: local, ttl: "ttl",
			note: `time to live is on "ttl", not on the expiry attribute "expiration": if the function's store names its expiry "ttl", give --expiry-attr ttl`},
		{name: "DescribeTimeToLive denied", kinds: local, ttl: "expiration", deny: "DescribeTimeToLive",
			note: "cannot tell whether DynamoDB deletes expired records by time to live (dynamodb:DescribeTimeToLive was denied): sweeping them"},
	} {
		for _, kind := range tc.kinds {
			t.Run(tc.name+"/"+kind.Name, func(t *testing.T) {
				f, proxy := dynamoSweepFixture(t, kind.Shared(t), tc.ttl, tc.consistency, tc.deny)
				putGolden(t, f)
				r := runAt(t, goldenNow, "", f.with("sweep")...)
				requireOK(t, r)
				require.Regexp(t, `^deleted 1 expired record from DynamoDB table "t-[^"]+" in us-east-1 at http://127\.0\.0\.1:\d+, in 1 batch of at most 1000\n$`, r.stdout)
				if tc.note == "" {
					require.Empty(t, r.stderr)
				} else {
					require.Contains(t, strings.Join(strings.Fields(r.stderr), " "), tc.note)
				}
				if tc.consistency == types.MultiRegionConsistencyStrong {
					require.Zero(t, proxy.calls("DescribeTimeToLive"), "an MRSC table has no time to live")
				}

				requireSweptGolden(t, f)

				putExpiredAt(t, f, goldenNow, 25)
				r = runAt(t, goldenNow, "", f.with("sweep", "--batch-size", "10", "--rate", "0", "-o", "json")...)
				requireOK(t, r)
				require.JSONEq(t, `{"deleted": 25, "batches": 3}`, r.stdout)
				r = runAt(t, goldenNow, "", f.with("sweep", "-o", "json")...)
				requireOK(t, r)
				require.JSONEq(t, `{"deleted": 0, "batches": 1}`, r.stdout)
			})
		}
	}
}

// A DynamoDB table with time to live on the expiry attribute, not MRSC, is
// not swept: DynamoDB deletes its expired records itself, and sweep says
// so without reading them.
func TestSweepDynamoDBWithTimeToLive(t *testing.T) {
	const note = `nothing to sweep: DynamoDB deletes expired items itself, by time to live on the expiry attribute "expiration" (ENABLED), ` +
		`within days; meanwhile the library treats them as absent`
	for _, tc := range []struct {
		name        string
		consistency types.MultiRegionConsistency
	}{{"one Region", ""}, {"MREC", types.MultiRegionConsistencyEventual}} {
		t.Run(tc.name, func(t *testing.T) {
			f, proxy := dynamoSweepFixture(t, dynamotest.DynamoDBLocal.Shared(t), "expiration", tc.consistency, "")
			putGolden(t, f)
			r := runAt(t, goldenNow, "", f.with("sweep")...)
			requireOK(t, r)
			require.Equal(t, note+"\n", r.stdout)
			require.Empty(t, r.stderr)
			r = runAt(t, goldenNow, "", f.with("sweep", "-o", "json")...)
			requireOK(t, r)
			require.JSONEq(t, `{"deleted": 0, "batches": 0, "note": `+strconv.Quote(note)+`}`, r.stdout)
			require.Zero(t, proxy.calls("Scan", "Query", "DeleteItem"), "nothing read, nothing deleted")
			r = runAt(t, goldenNow, "", f.with("get", goldenRecords[4].Key)...)
			requireOK(t, r)
		})
	}
}
