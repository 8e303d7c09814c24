package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/persistence"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
	"github.com/retrysafe/retrysafe/persistence/memory"
)

// The drivers' protocol: the harness writes one command per line to a
// driver's stdin, and the driver answers each with one line on stdout. The
// Go driver (this file: the harness binary started again, with
// RETRYSAFE_COMPARE_DRIVER=1 in its environment) and the
// Node driver (node/driver.mjs) speak it alike.
//
//	{"op":"init", ...initCmd}      -> {"ok":true,"runtime":...,"library":...}
//	{"op":"prepare", ...phaseCmd}  -> {"ok":true}
//	{"op":"run"}                   -> runResult
//	{"op":"exit"}
//
// prepare builds the phase's events and a fresh store and wrapped handler,
// and for a replay makes the first call that the replays repeat; run then
// measures. The harness counts the DynamoDB requests between the two.
type command struct {
	Op string `json:"op"`
	initCmd
	phaseCmd
}

// initCmd configures a driver once.
type initCmd struct {
	Endpoint string `json:"endpoint,omitempty"` // the DynamoDB endpoint (the counting proxy)
	Region   string `json:"region,omitempty"`
	Table    string `json:"table,omitempty"`
	Event    string `json:"event,omitempty"` // the event template; ORDER_ID is replaced
}

// phaseCmd describes one measured phase.
type phaseCmd struct {
	Store string `json:"store,omitempty"` // "memory", "dynamodb", "cached" (DynamoDB behind a local cache) or "sdk" (the SDK floor, Go only)
	Path  string `json:"path,omitempty"`  // "first" (a new key per call) or "replay" (one completed key)
	N     int    `json:"n,omitempty"`     // calls per loop
	Tag   string `json:"tag,omitempty"`   // makes the phase's order IDs unique
}

// reply is a driver's answer: an acknowledgement, an error, or the result
// of a run.
type reply struct {
	OK      bool   `json:"ok,omitempty"`
	Error   string `json:"error,omitempty"`
	Runtime string `json:"runtime,omitempty"`
	Library string `json:"library,omitempty"`
	runResult
}

// runResult is what a run measured. The latency loop calls the bare handler
// and then the wrapped one on each event, timing both; the CPU loops call
// each alone, N times, between two readings of the process's CPU time
// (user and system, every thread).
type runResult struct {
	N            int     `json:"n,omitempty"`
	BareNs       []int64 `json:"bare_ns,omitempty"`
	WrappedNs    []int64 `json:"wrapped_ns,omitempty"`
	CPUBareNs    int64   `json:"cpu_bare_ns,omitempty"`
	CPUWrappedNs int64   `json:"cpu_wrapped_ns,omitempty"`
	// The wall-clock time of the CPU loops: CPU time above it was spent on
	// other threads (the garbage collector, the runtime, the SDK).
	WallBareNs    int64 `json:"wall_bare_ns,omitempty"`
	WallWrappedNs int64 `json:"wall_wrapped_ns,omitempty"`
}

// key is the expression both sides select the idempotency key with.
const key = "powertools_json(body).order_id"

// respond is the bare handler: what the function does without idempotency.
func respond(_ context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return events.APIGatewayProxyResponse{
		StatusCode: 201,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       `{"payment_id":"pay_123","status":"created"}`,
	}, nil
}

type handler = func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// goDriver is the Go side: idempotency.Wrap around respond.
type goDriver struct {
	init   initCmd
	client *awsdynamodb.Client // one client for the process, as in a Lambda execution environment
	phase  *goPhase
}

type goPhase struct {
	name      string
	n         int
	event     string // the template
	latencyID func(i int) string
	cpuID     func(i int) string
	ctx       context.Context
	cancel    context.CancelFunc
	wrapped   handler
}

// runDriver serves the protocol on r and w until exit or the end of r.
func runDriver(r io.Reader, w io.Writer) error {
	d := &goDriver{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	enc := json.NewEncoder(w)
	for sc.Scan() {
		var cmd command
		var out reply
		err := json.Unmarshal(sc.Bytes(), &cmd)
		if err == nil {
			if cmd.Op == "exit" {
				return nil
			}
			out, err = d.handle(&cmd)
		}
		if err != nil {
			out = reply{Error: err.Error()}
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return sc.Err()
}

func (d *goDriver) handle(cmd *command) (reply, error) {
	switch cmd.Op {
	case "init":
		d.init = cmd.initCmd
		d.client = awsdynamodb.NewFromConfig(aws.Config{
			Region:       cmd.Region,
			Credentials:  credentials.NewStaticCredentialsProvider("compare", "compare", ""),
			BaseEndpoint: aws.String(cmd.Endpoint),
		})
		return reply{OK: true, Runtime: runtime.Version(), Library: libraryVersion()}, nil
	case "prepare":
		return reply{OK: true}, d.prepare(&cmd.phaseCmd)
	case "run":
		if d.phase == nil {
			return reply{}, errors.New("run before prepare")
		}
		res, err := d.run()
		return reply{runResult: res}, err
	}
	return reply{}, fmt.Errorf("unknown op %q", cmd.Op)
}

func (d *goDriver) store(name string) (persistence.Store, error) {
	switch name {
	case "memory":
		return memory.New(), nil
	case "dynamodb":
		return dynamodb.New(d.client, d.init.Table)
	case "cached":
		s, err := dynamodb.New(d.client, d.init.Table)
		if err != nil {
			return nil, err
		}
		// Powertools' default maxLocalCacheSize.
		return memory.NewCache(s, 1000), nil
	}
	return nil, fmt.Errorf("unknown store %q", name)
}

// chunk is how many events a driver decodes at a time, outside the
// measurements. A Lambda function holds one event at a time; holding every
// event of a phase at once would give the garbage collectors a live heap
// that no function has, and weigh on Go's (which marks the whole live heap
// in every cycle) far more than on V8's generational one.
const chunk = 64

// decode fills dst with the events numbered from, from, on.
func (p *goPhase) decode(dst []events.APIGatewayProxyRequest, orderID func(int) string, from int) error {
	for j := range dst {
		dst[j] = events.APIGatewayProxyRequest{}
		if err := json.Unmarshal([]byte(strings.Replace(p.event, "ORDER_ID", orderID(from+j), 1)), &dst[j]); err != nil {
			return err
		}
	}
	return nil
}

func (d *goDriver) prepare(cmd *phaseCmd) error {
	var wrapped handler
	if cmd.Store == "sdk" {
		f := &sdkFloor{client: d.client, table: d.init.Table}
		wrapped = f.first
		if cmd.Path == "replay" {
			wrapped = f.replay
		}
	} else {
		store, err := d.store(cmd.Store)
		if err != nil {
			return err
		}
		wrapped, err = idempotency.Wrap(respond, store, idempotency.WithKey(key), idempotency.WithKeyPrefix("orders"))
		if err != nil {
			return err
		}
	}
	// Lambda gives every invocation a deadline; so does this context, for
	// the in-progress expiry, on both sides.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	p := &goPhase{name: cmd.Store + "/" + cmd.Path, n: cmd.N, event: d.init.Event, ctx: ctx, cancel: cancel, wrapped: wrapped}
	if cmd.Path == "first" {
		p.latencyID = func(i int) string { return cmd.Tag + "-lat-" + strconv.Itoa(i) }
		p.cpuID = func(i int) string { return cmd.Tag + "-cpu-" + strconv.Itoa(i) }
	} else {
		p.latencyID = func(int) string { return cmd.Tag + "-replay" }
		p.cpuID = p.latencyID
	}
	var first [1]events.APIGatewayProxyRequest
	if err := p.decode(first[:], p.latencyID, 0); err != nil {
		cancel()
		return err
	}
	if cmd.Path == "replay" {
		// The first call, which the replays repeat.
		call := wrapped
		if cmd.Store == "sdk" {
			call = (&sdkFloor{client: d.client, table: d.init.Table}).first
		}
		if _, err := call(ctx, first[0]); err != nil {
			cancel()
			return err
		}
	}
	if d.phase != nil {
		d.phase.cancel()
	}
	d.phase = p
	// Start every phase from a collected heap, so that the collector does
	// not work off the previous phase's garbage during this one. The Node
	// side collects too.
	runtime.GC()
	return nil
}

func (d *goDriver) run() (runResult, error) {
	p := d.phase
	d.phase = nil
	defer p.cancel()
	n := p.n
	res := runResult{N: n, BareNs: make([]int64, n), WrappedNs: make([]int64, n)}
	evs := make([]events.APIGatewayProxyRequest, chunk)
	// The loops carry profiler labels, so that a profile (-cpuprofile) can
	// be narrowed to one: go tool pprof -tagfocus loop=cpu-wrapped.
	loop := func(name string, orderID func(int) string, call func(i int, ev *events.APIGatewayProxyRequest) error) (err error) {
		pprof.Do(p.ctx, pprof.Labels("phase", p.name, "loop", name), func(context.Context) {
			for from := 0; from < n; from += chunk {
				batch := evs[:min(chunk, n-from)]
				if err = p.decode(batch, orderID, from); err != nil {
					return
				}
				for j := range batch {
					if err = call(from+j, &batch[j]); err != nil {
						return
					}
				}
			}
		})
		return err
	}
	err := loop("latency", p.latencyID, func(i int, ev *events.APIGatewayProxyRequest) error {
		t0 := time.Now()
		_, _ = respond(p.ctx, *ev)
		t1 := time.Now()
		out, err := p.wrapped(p.ctx, *ev)
		t2 := time.Now()
		if err != nil {
			return err
		}
		if out.StatusCode != 201 {
			return fmt.Errorf("unexpected response %+v", out)
		}
		res.BareNs[i] = int64(t1.Sub(t0))
		res.WrappedNs[i] = int64(t2.Sub(t1))
		return nil
	})
	if err != nil {
		return res, err
	}
	// The CPU loops read the clocks around each chunk of calls only, not
	// around the decoding of the next chunk.
	var cpu0 int64
	var wall0 time.Time
	timed := func(cpu, wall *int64, call func(*events.APIGatewayProxyRequest) error) func(int, *events.APIGatewayProxyRequest) error {
		return func(i int, ev *events.APIGatewayProxyRequest) error {
			if i%chunk == 0 {
				cpu0, wall0 = cpuTime(), time.Now()
			}
			err := call(ev)
			if i%chunk == chunk-1 || i == n-1 {
				*cpu += cpuTime() - cpu0
				*wall += int64(time.Since(wall0))
			}
			return err
		}
	}
	_ = loop("cpu-bare", p.cpuID, timed(&res.CPUBareNs, &res.WallBareNs, func(ev *events.APIGatewayProxyRequest) error {
		_, _ = respond(p.ctx, *ev)
		return nil
	}))
	err = loop("cpu-wrapped", p.cpuID, timed(&res.CPUWrappedNs, &res.WallWrappedNs, func(ev *events.APIGatewayProxyRequest) error {
		_, err := p.wrapped(p.ctx, *ev)
		return err
	}))
	return res, err
}

// libraryVersion names this module's version, or its VCS revision when it
// is built from a checkout.
func libraryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "retrysafe"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v = s.Value[:12]
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += "+dirty"
		}
	}
	return "retrysafe " + v
}

// sdkFloor is the floor of the DynamoDB phases: the requests the library
// makes, made directly with the SDK, with the least each needs, and a
// record of the same size. A first call reserves the key with a
// conditional PutItem, runs the handler and stores its response with an
// UpdateItem; a replay is the conditional PutItem that fails and returns
// the existing item (ALL_OLD), or reads it with a GetItem from a server
// that does not return it, and decodes the stored response. Its key is
// the SHA-256 of the body: no key expression, no payload hash, no fencing
// token, no expiry checks, no observer.
type sdkFloor struct {
	client *awsdynamodb.Client
	table  string
}

func (f *sdkFloor) key(ev events.APIGatewayProxyRequest) map[string]types.AttributeValue {
	sum := sha256.Sum256([]byte(ev.Body))
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "orders#" + hex.EncodeToString(sum[:])}}
}

// put is the reservation: an item with the key, a status and an expiry.
func (f *sdkFloor) put(ctx context.Context, ev events.APIGatewayProxyRequest) (*awsdynamodb.PutItemOutput, error) {
	item := f.key(ev)
	item["status"] = &types.AttributeValueMemberS{Value: "INPROGRESS"}
	item["expiration"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}
	return f.client.PutItem(ctx, &awsdynamodb.PutItemInput{
		TableName:                           &f.table,
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(id)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
}

func (f *sdkFloor) first(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	if _, err := f.put(ctx, ev); err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	resp, err := respond(ctx, ev)
	if err != nil {
		return resp, err
	}
	data, err := json.Marshal(resp)
	if err != nil {
		return resp, err
	}
	_, err = f.client.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName:                &f.table,
		Key:                      f.key(ev),
		UpdateExpression:         aws.String("SET #s = :s, #d = :d"),
		ExpressionAttributeNames: map[string]string{"#s": "status", "#d": "data"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": &types.AttributeValueMemberS{Value: "COMPLETED"},
			":d": &types.AttributeValueMemberS{Value: string(data)},
		},
	})
	return resp, err
}

func (f *sdkFloor) replay(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	var resp events.APIGatewayProxyResponse
	_, err := f.put(ctx, ev)
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) {
		return resp, fmt.Errorf("sdk floor: the reservation of a completed key: %v", err)
	}
	item := failed.Item
	if item == nil {
		out, err := f.client.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: &f.table, Key: f.key(ev), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return resp, err
		}
		item = out.Item
	}
	data, ok := item["data"].(*types.AttributeValueMemberS)
	if !ok {
		return resp, errors.New("sdk floor: the record has no response")
	}
	err = json.Unmarshal([]byte(data.Value), &resp)
	return resp, err
}
