package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
)

// TestMain lets the harness start this test binary as its Go driver, as it
// starts its own binary outside tests.
func TestMain(m *testing.M) {
	if os.Getenv(driverEnv) == "1" {
		driverMain()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPercentileAndMedian(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	require.Equal(t, 5.0, percentile(xs, 0.5))
	require.Equal(t, 10.0, percentile(xs, 0.99))
	require.Equal(t, 1.0, percentile(xs, 0))
	require.Equal(t, []int64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}, xs, "percentile sorts a copy")
	require.True(t, math.IsNaN(percentile(nil, 0.5)))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	require.Equal(t, 3.0, median([]float64{3, 1, 5}))
}

func TestCompareTakesRatiosWithinRounds(t *testing.T) {
	// Round 2 ran on a slower machine for both sides: the ratio within each
	// round is 10, whatever the absolute times.
	ours := summary{RoundMediansNs: []float64{1000, 5000, 1100}, RoundCPUNs: []float64{2000, 9000, 2000}, AddedP99Ns: 4000}
	theirs := summary{RoundMediansNs: []float64{10000, 50000, 11000}, RoundCPUNs: []float64{40000, 180000, 40000}, AddedP99Ns: 100000}
	r := compare(ours, theirs)
	require.InDelta(t, 10, float64(r.Median), 1e-9)
	require.InDelta(t, 20, float64(r.CPU), 1e-9)
	require.InDelta(t, 25, float64(r.P99), 1e-9)

	// A side with no CPU time measured has no ratio, and the report says so
	// instead of failing to write it.
	r = compare(summary{RoundCPUNs: []float64{0}}, theirs)
	require.True(t, math.IsNaN(float64(r.CPU)))
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.Contains(t, string(b), `"cpu":null`)
	var back ratios
	require.NoError(t, json.Unmarshal(b, &back))
	require.True(t, math.IsNaN(float64(back.CPU)))
	require.Equal(t, "n/a", fmtRatio(back.CPU))
}

// The floor's two runs pool round by round: their invocations together,
// their CPU per invocation averaged.
func TestPool(t *testing.T) {
	a := []round{{AddedNs: []int64{1, 2}, CPUAddedNs: 100, WallAddedNs: 10, Requests: 2}, {AddedNs: []int64{3}, CPUAddedNs: 300}}
	b := []round{{AddedNs: []int64{5}, CPUAddedNs: 200, WallAddedNs: 30, Requests: 2}, {AddedNs: []int64{7}, CPUAddedNs: 100}}
	p := pool(a, b)
	require.Len(t, p, 2)
	require.Equal(t, []int64{1, 2, 5}, p[0].AddedNs)
	require.Equal(t, 150.0, p[0].CPUAddedNs)
	require.Equal(t, 20.0, p[0].WallAddedNs)
	require.Equal(t, 2.0, p[0].Requests)
	require.Equal(t, 200.0, p[1].CPUAddedNs)
	require.Equal(t, []int64{1, 2}, a[0].AddedNs, "the first run's rounds are left as they were")
}

func TestFormatting(t *testing.T) {
	require.Equal(t, "950 ns", fmtNs(950.0))
	require.Equal(t, "2.35 µs", fmtNs(2349.0))
	require.Equal(t, "12.3 ms", fmtNs(12.3e6))
	require.Equal(t, "n/a", fmtNs(math.NaN()))
	require.Equal(t, "1 µs", fmtTick(1e3))
	require.Equal(t, "100 ms", fmtTick(1e8))
	require.Equal(t, "10 ns", fmtTick(10))
	require.Equal(t, "23×", fmtRatio(23.4))
	require.Equal(t, "1.9×", fmtRatio(1.94))
	require.Equal(t, "0", fmtRequests(summary{}))
	require.Equal(t, "2 (1 PutItem, 1 UpdateItem)", fmtRequests(summary{Requests: 2, RequestsOps: map[string]float64{"UpdateItem": 1, "PutItem": 1}}))
}

func sampleReport() *report {
	ns := func(v float64, n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(v)
		}
		return out
	}
	mk := func(added, cpu, req float64, ops map[string]float64) []round {
		return []round{{AddedNs: ns(added, 100), BareNs: ns(50, 100), CPUAddedNs: cpu, Requests: req, RequestsOps: ops}}
	}
	r := &report{Machine: "test machine", Ours: "retrysafe test", Theirs: "Powertools test", AllOld: true, Rounds: 1, NMemory: 100, NDynamoDB: 100, EventBytes: 1010}
	for _, c := range []struct {
		ph                   phase
		ours, theirs         float64
		reqOurs, reqTheirs   float64
		opsOurs, opsTheirs   map[string]float64
		cpuOurs, cpuTheirsNs float64
	}{
		{phase{"memory", "first"}, 1000, 30000, 0, 0, nil, nil, 1500, 40000},
		{phase{"memory", "replay"}, 800, 20000, 0, 0, nil, nil, 1000, 25000},
		{phase{"dynamodb", "first"}, 3e6, 6e6, 2, 2, map[string]float64{"PutItem": 1, "UpdateItem": 1}, map[string]float64{"PutItem": 1, "UpdateItem": 1}, 1e6, 4e6},
		{phase{"dynamodb", "replay"}, 2e6, 4e6, 1, 2, map[string]float64{"PutItem": 1}, map[string]float64{"PutItem": 1, "GetItem": 1}, 8e5, 3e6},
		{phase{"cached", "replay"}, 900, 25000, 0, 0, nil, nil, 1000, 30000},
	} {
		o, th := summarize(mk(c.ours, c.cpuOurs, c.reqOurs, c.opsOurs), 200), summarize(mk(c.theirs, c.cpuTheirsNs, c.reqTheirs, c.opsTheirs), 200)
		r.Rows = append(r.Rows, row{Phase: c.ph, Name: c.ph.Name(), Ours: o, Theirs: th, Ratios: compare(o, th)})
	}
	return r
}

func TestReportTargets(t *testing.T) {
	r := sampleReport()
	r.check()
	for _, tg := range r.Targets {
		require.True(t, tg.Met, "%s: %s", tg.What, tg.Got)
	}

	r.Rows[1].Ratios.Median = 4.9
	r.Rows[3].Ours.Requests = 2
	r.check()
	var unmet []string
	for _, tg := range r.Targets {
		if !tg.Met {
			unmet = append(unmet, tg.What)
		}
	}
	require.Equal(t, []string{
		"in-memory overhead at least 5× lower than Powertools' (median added latency), replay",
		"replay, DynamoDB (dynalite): DynamoDB requests per invocation, 1",
	}, unmet)

	// Without the ALL_OLD emulation a replay reads the conflict with a GetItem.
	r.AllOld = false
	r.check()
	for _, tg := range r.Targets {
		if strings.HasPrefix(tg.What, "replay, DynamoDB (dynalite): ") && strings.Contains(tg.What, "requests per invocation") {
			require.True(t, strings.HasSuffix(tg.What, "per invocation, 2"), tg.What)
			require.True(t, tg.Met)
		}
	}
}

func TestReportOutputs(t *testing.T) {
	r := sampleReport()
	r.Capacity = []capacityRow{{Size: 8 << 10, Ours: capacityUnits{First: 3, Replay: 2}, Theirs: capacityUnits{First: 10, Replay: 9}}}
	r.check()
	dir := t.TempDir()
	require.NoError(t, r.write(dir))

	md, err := os.ReadFile(filepath.Join(dir, "compare.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "| first call, in-memory store | **1.00 µs** | 30.0 µs | 30× |")
	require.Contains(t, string(md), "| **1 (1 PutItem)** | 2 (1 GetItem, 1 PutItem) |")
	require.Contains(t, string(md), "(compare.svg)")
	require.Contains(t, string(md), "| 8 KB | **3** | 10 | **2** | 9 |")

	svg, err := os.ReadFile(filepath.Join(dir, "compare.svg"))
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		if cd, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(cd)) != "" {
			texts = append(texts, string(cd))
		}
	}
	require.Contains(t, texts, "first call, in-memory store")
	require.Contains(t, texts, "30×", "the ratio label")
	require.Contains(t, texts, "1.00 µs")

	// -render writes the same files again from compare.json alone.
	other := t.TempDir()
	back, err := render(filepath.Join(dir, "compare.json"), other)
	require.NoError(t, err)
	require.Len(t, back.Rows, len(phases))
	for _, name := range []string{"compare.md", "compare.svg", "compare.json"} {
		a, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(other, name))
		require.NoError(t, err)
		require.Equal(t, string(a), string(b), name)
	}
}

// TestProxy checks that the proxy counts requests by operation and, with
// allOld, returns the existing item with a failed conditional PutItem, as
// DynamoDB does.
func TestProxy(t *testing.T) {
	srv := dynalite.Start(t)
	require.NoError(t, createTable(t.Context(), srv.NewClient(), "proxied"))
	for _, allOld := range []bool{false, true} {
		px, client := proxied(t, srv.Endpoint, srv.Config(), allOld)

		table := "proxied"
		item := map[string]types.AttributeValue{
			"id":     &types.AttributeValueMemberS{Value: "k" + strings.ToUpper(t.Name()) + map[bool]string{true: "1", false: "0"}[allOld]},
			"status": &types.AttributeValueMemberS{Value: "COMPLETED"},
		}
		cond := "attribute_not_exists(id)"
		put := &awsdynamodb.PutItemInput{TableName: &table, Item: item, ConditionExpression: &cond,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
		before := px.Snapshot()
		_, err := client.PutItem(t.Context(), put)
		require.NoError(t, err)
		_, err = client.PutItem(t.Context(), put)
		var failed *types.ConditionalCheckFailedException
		require.ErrorAs(t, err, &failed)
		if allOld {
			require.Equal(t, item, failed.Item, "the existing item comes back with the failure")
		} else {
			require.Empty(t, failed.Item, "dynalite ignores ALL_OLD")
		}
		total, ops := perOp(before, px.Snapshot(), 1)
		require.Equal(t, 2.0, total, "the proxy's own read is not counted")
		require.Equal(t, map[string]float64{"PutItem": 2}, ops)
	}
}

// proxied starts a proxy in front of endpoint, for the test t, and
// returns it with a client of cfg that sends its requests through it.
func proxied(t *testing.T, endpoint string, cfg aws.Config, allOld bool) (*proxy, *awsdynamodb.Client) {
	t.Helper()
	px, err := newProxy(endpoint, []string{"id"}, allOld)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	cfg.BaseEndpoint = aws.String(px.URL())
	return px, awsdynamodb.NewFromConfig(cfg)
}

func TestGoDriver(t *testing.T) {
	event, err := os.ReadFile(filepath.Join("testdata", "event.json"))
	require.NoError(t, err)
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, c := range []command{
		{Op: "init", initCmd: initCmd{Event: string(event), Region: "us-east-1", Endpoint: "http://127.0.0.1:1", Table: "unused"}},
		{Op: "prepare", phaseCmd: phaseCmd{Store: "memory", Path: "first", N: 20, Tag: "t1"}},
		{Op: "run"},
		{Op: "prepare", phaseCmd: phaseCmd{Store: "memory", Path: "replay", N: 20, Tag: "t2"}},
		{Op: "run"},
		{Op: "run"},
		{Op: "prepare", phaseCmd: phaseCmd{Store: "redis"}},
		{Op: "call", phaseCmd: phaseCmd{Store: "memory", Tag: "t3", Body: `{"payment_id":"pay_1"}`}},
		{Op: "exit"},
	} {
		require.NoError(t, enc.Encode(c))
	}
	var out bytes.Buffer
	require.NoError(t, runDriver(&in, &out))
	dec := json.NewDecoder(&out)
	var replies []reply
	for dec.More() {
		var r reply
		require.NoError(t, dec.Decode(&r))
		replies = append(replies, r)
	}
	require.Len(t, replies, 8)
	require.True(t, replies[7].OK, replies[7].Error)
	require.True(t, replies[0].OK)
	require.Contains(t, replies[0].Library, "retrysafe")
	for _, r := range []reply{replies[2], replies[4]} {
		require.Empty(t, r.Error)
		require.Equal(t, 20, r.N)
		require.Len(t, r.BareNs, 20)
		require.Len(t, r.WrappedNs, 20)
	}
	require.Equal(t, "run before prepare", replies[5].Error)
	require.Equal(t, `unknown store "redis"`, replies[6].Error)
}

// TestCompare runs the whole comparison with small counts: both drivers,
// dynalite and the proxy. Timings are not checked (the machine is shared);
// the DynamoDB request counts are exact, and must meet the targets.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dynalite and Node.js")
	}
	testCompare(t, serverDynalite)
}

// TestCompareDynamoDBLocal is TestCompare against DynamoDB Local, where
// both libraries get the existing item of a failed reservation from the
// server itself (the proxy rewrites nothing), so that a replay is one
// PutItem on both sides.
func TestCompareDynamoDBLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts DynamoDB Local and Node.js")
	}
	srv, err := dynamodblocal.StartContext(t.Context())
	if errors.Is(err, dynamodblocal.ErrUnavailable) && !testenv.Required() {
		t.Skipf("%v (set %s=1 to make this a failure)", err, testenv.RequireEnv)
	}
	require.NoError(t, err)
	require.NoError(t, srv.Stop())
	rep := testCompare(t, serverDynamoDBLocal)
	require.True(t, rep.NativeAllOld)
	require.False(t, rep.AllOld, "the proxy emulates nothing")
	require.Contains(t, rep.Rows[3].Name, "DynamoDB Local")
	require.Equal(t, 1.0, rep.Rows[3].Ours.Requests, "a replay is the failed PutItem alone")

	// Capacity units are deterministic: DynamoDB Local reports AWS's
	// documented units, and the proxy adds a failed write's.
	require.Len(t, rep.Capacity, len(capacitySizes))
	small, eight := rep.Capacity[0], rep.Capacity[2]
	require.Equal(t, capacityUnits{First: 2, Replay: 1}, small.Ours, "a reservation and a completion, then a failed reservation, a unit each")
	require.Equal(t, 8<<10, eight.Size)
	require.Equal(t, capacityUnits{First: 3, Replay: 2}, eight.Ours, "an 8 KB response, compressed, in 2 write units")
	for _, c := range rep.Capacity {
		require.Positive(t, c.Theirs.First, "Powertools, %d bytes", c.Size)
		require.Positive(t, c.Theirs.Replay, "Powertools, %d bytes", c.Size)
	}
}

// The proxy meters the capacity both sides consume: what the server
// reports, and for a failed conditional write what AWS documents, a write
// unit per KB of the existing item.
func TestProxyMetersCapacity(t *testing.T) {
	srv, err := dynamodblocal.StartContext(t.Context())
	if errors.Is(err, dynamodblocal.ErrUnavailable) && !testenv.Required() {
		t.Skipf("%v (set %s=1 to make this a failure)", err, testenv.RequireEnv)
	}
	require.NoError(t, err)
	defer srv.Stop()
	require.NoError(t, createTable(t.Context(), srv.NewClient(), "metered"))
	px, client := proxied(t, srv.Endpoint, srv.Config(), false)

	table := "metered"
	item := map[string]types.AttributeValue{
		"id":   &types.AttributeValueMemberS{Value: "k"},
		"data": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"body": &types.AttributeValueMemberS{Value: strings.Repeat(`"`, 2000)}}},
	}
	cond := "attribute_not_exists(id)"
	put := &awsdynamodb.PutItemInput{TableName: &table, Item: item, ConditionExpression: &cond,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	_, err = client.PutItem(t.Context(), put)
	require.NoError(t, err)
	require.Zero(t, px.units(), "metering is off")

	px.meter(true)
	_, err = client.PutItem(t.Context(), &awsdynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "other"}}})
	require.NoError(t, err)
	require.Equal(t, 1.0, px.units(), "reported by the server")
	_, err = client.PutItem(t.Context(), put)
	var failed *types.ConditionalCheckFailedException
	require.ErrorAs(t, err, &failed)
	// id (2+1) + data (4) + a map of one element (3+1) + body (4) + 2000
	// quotes, unescaped: 2015 bytes, 2 write units.
	require.Equal(t, 3.0, px.units(), "the failed write, by the documented rule")
}

func TestItemSize(t *testing.T) {
	var item map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(`{
		"id": {"S": "orders#é"},
		"expiration": {"N": "1700000000"},
		"in_progress_expiration": {"N": "-1700000000123.50"},
		"data": {"B": "AAEC"},
		"held": {"BOOL": true},
		"tags": {"SS": ["ab", "c"]},
		"list": {"L": [{"S": "x"}, {"NULL": true}]}
	}`), &item))
	want := len("id") + len("orders#é") +
		len("expiration") + 2 + // "17": 1 byte, plus 1
		len("in_progress_expiration") + 8 + // 170000000012350 trimmed to 1700000000123 5: 14 digits, 7 bytes, plus 1
		len("data") + 3 +
		len("held") + 1 +
		len("tags") + 3 +
		len("list") + 3 + 2 + 1 + 1
	require.Equal(t, want, itemSize(item))
}

func testCompare(t *testing.T, server string) *report {
	nodeModules := filepath.Join("node", "node_modules", "@aws-lambda-powertools", "idempotency")
	if _, err := os.Stat(nodeModules); err != nil {
		if !testenv.Required() {
			t.Skipf("Powertools is not installed (run `npm ci` in bench/compare/node; set %s=1 to make this a failure)", testenv.RequireEnv)
		}
		t.Fatalf("Powertools is not installed: run `npm ci` in bench/compare/node")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var logs bytes.Buffer
	rep, err := run(ctx, options{rounds: 1, warmup: 0, nMemory: 30, nDynamoDB: 4, out: dir, server: server, allOld: true, node: "node"}, &logs)
	require.NoError(t, err, logs.String())
	require.Len(t, rep.Rows, len(phases))
	for _, tg := range rep.Targets {
		if strings.Contains(tg.What, "requests") {
			require.True(t, tg.Met, "%s: %s", tg.What, tg.Got)
		}
	}
	for _, w := range rep.Rows {
		want := 4
		if w.Phase.Store == "memory" {
			want = 30
		}
		require.Equal(t, want, w.Ours.N, w.Name)
		require.Equal(t, w.Ours.N, w.Theirs.N, "same counts on both sides")
	}
	require.Equal(t, 1.0, rep.Rows[3].Theirs.RequestsOps["PutItem"], "Powertools' replay is one PutItem with ALL_OLD too")
	for _, w := range rep.Rows[2:4] {
		require.NotNil(t, w.Floor, w.Name)
		require.NotNil(t, w.FloorAA, "%s: the A/A check, the floor run twice", w.Name)
		require.Equal(t, 2*w.OursWithFloor.N, w.Floor.N, "the floor runs twice in the library's loops, pooled")
		require.Equal(t, w.Ours.Requests, w.OursWithFloor.Requests)
		require.Equal(t, w.Ours.Requests, w.Floor.Requests, "%s: the floor makes the library's requests", w.Name)
		require.NotNil(t, w.ProtocolFloor, "%s: the protocol's floor", w.Name)
		require.Equal(t, w.OursWithFloor.N, w.ProtocolFloor.N)
		require.Equal(t, w.OursWithFloor.RequestsOps, w.ProtocolFloor.RequestsOps, "%s: the protocol's floor makes the library's requests", w.Name)
		require.Equal(t, w.OursWithFloor.RequestBytes, w.ProtocolFloor.RequestBytes, "%s: byte for byte, but for values of the same length", w.Name)
		require.NotNil(t, w.ProtocolOverFloor)
		require.NotNil(t, w.OverProtocolFloor)
	}
	for _, name := range []string{"compare.md", "compare.svg", "compare.json"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
	}
	return rep
}
