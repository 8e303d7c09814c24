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
	"math/rand/v2"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
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
//	{"op":"call", ...phaseCmd}     -> {"ok":true}
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
	Store string `json:"store,omitempty"` // "memory", "dynamodb", "cached" (DynamoDB behind a local cache), "sdk" (the SDK floor, Go only) or "sdk-protocol" (the protocol's floor, Go only)
	Path  string `json:"path,omitempty"`  // "first" (a new key per call) or "replay" (one completed key)
	N     int    `json:"n,omitempty"`     // calls per loop
	Tag   string `json:"tag,omitempty"`   // makes the phase's order IDs unique
	// With are the stores of further sides that run in the same loops as
	// Store, interleaved with it (Go driver only: "sdk", the SDK floor, and
	// "sdk-protocol", the protocol's floor):
	// their results come in runResult.With, in this order.
	With []string `json:"with,omitempty"`
	// Turn is how many calls each side makes in its turn of the CPU loop
	// (Go driver; 0: a chunk's).
	Turn int `json:"turn,omitempty"`
	// Body is what the handler of a call returns as its response's body
	// (the call op: one call of a fresh wrapped handler on Store, with the
	// order ID Tag, unmeasured, for the capacity it consumes).
	Body string `json:"body,omitempty"`
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
	// Requests and RequestBytes are the DynamoDB requests (by operation)
	// and the bytes of their bodies that the side sent in its loops, as
	// the Go driver counts them on its own HTTP client (nil from the Node
	// driver: the proxy counts those).
	Requests     map[string]int64 `json:"requests,omitempty"`
	RequestBytes int64            `json:"request_bytes,omitempty"`
	// With are the results of the sides of phaseCmd.With.
	With []runResult `json:"with,omitempty"`
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
	init initCmd
	// http is the HTTP client of the process, as in a Lambda execution
	// environment: one transport, one pool of connections. Each side of
	// a phase sends through a counter of its own in front of it.
	http  *awshttp.BuildableClient
	phase *goPhase
}

type goPhase struct {
	name   string
	n      int
	turn   int
	event  string // the template
	ctx    context.Context
	cancel context.CancelFunc
	sides  []*goSide // the phase's store first, then those of phaseCmd.With
}

// goSide is one side of a phase: a wrapped handler (or the SDK floor),
// its events, and the requests it sends.
type goSide struct {
	wrapped   handler
	latencyID func(i int) string
	cpuID     func(i int) string
	counter   *requestCounter
	evs       []events.APIGatewayProxyRequest // the chunk of events being run
	res       runResult
}

// requestCounter is an HTTP client that counts the DynamoDB requests it
// sends, by operation, and the bytes of their bodies.
type requestCounter struct {
	next  aws.HTTPClient
	mu    sync.Mutex
	ops   map[string]int64
	bytes int64
}

func (c *requestCounter) Do(req *http.Request) (*http.Response, error) {
	op := req.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		op = op[i+1:]
	}
	c.mu.Lock()
	c.ops[op]++
	c.bytes += max(req.ContentLength, 0)
	c.mu.Unlock()
	return c.next.Do(req)
}

// take returns the counts so far, and starts counting anew.
func (c *requestCounter) take() (map[string]int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops, n := c.ops, c.bytes
	c.ops, c.bytes = map[string]int64{}, 0
	return ops, n
}

// client returns a DynamoDB client that sends through a new counter.
func (d *goDriver) client() (*awsdynamodb.Client, *requestCounter) {
	counter := &requestCounter{next: d.http, ops: map[string]int64{}}
	return awsdynamodb.NewFromConfig(aws.Config{
		Region:       d.init.Region,
		Credentials:  credentials.NewStaticCredentialsProvider("compare", "compare", ""),
		BaseEndpoint: aws.String(d.init.Endpoint),
		HTTPClient:   counter,
	}), counter
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
		d.http = awshttp.NewBuildableClient()
		return reply{OK: true, Runtime: runtime.Version(), Library: libraryVersion()}, nil
	case "prepare":
		return reply{OK: true}, d.prepare(&cmd.phaseCmd)
	case "run":
		if d.phase == nil {
			return reply{}, errors.New("run before prepare")
		}
		res, err := d.run()
		return reply{runResult: res}, err
	case "call":
		return reply{OK: true}, d.call(&cmd.phaseCmd)
	}
	return reply{}, fmt.Errorf("unknown op %q", cmd.Op)
}

// call makes one call of a fresh handler that returns cmd.Body, wrapped
// as the phases' are, with the order ID cmd.Tag.
func (d *goDriver) call(cmd *phaseCmd) error {
	client, _ := d.client()
	st, err := d.store(cmd.Store, client)
	if err != nil {
		return err
	}
	body := cmd.Body
	wrapped, err := idempotency.Wrap(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: body}, nil
	}, st, idempotency.WithKey(key), idempotency.WithKeyPrefix("orders"))
	if err != nil {
		return err
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal([]byte(strings.Replace(d.init.Event, "ORDER_ID", cmd.Tag, 1)), &ev); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, err := wrapped(ctx, ev)
	if err == nil && out.Body != body {
		err = fmt.Errorf("call %s: got a body of %d bytes, want %d", cmd.Tag, len(out.Body), len(body))
	}
	return err
}

func (d *goDriver) store(name string, client *awsdynamodb.Client) (persistence.Store, error) {
	switch name {
	case "memory":
		return memory.New(), nil
	case "dynamodb":
		return dynamodb.New(client, d.init.Table)
	case "cached":
		s, err := dynamodb.New(client, d.init.Table)
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
	// Lambda gives every invocation a deadline; so does this context, for
	// the in-progress expiry, on both sides.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	turn := cmd.Turn
	if turn <= 0 || turn > chunk {
		turn = chunk
	}
	p := &goPhase{name: cmd.Store + "/" + cmd.Path, n: cmd.N, turn: turn, event: d.init.Event, ctx: ctx, cancel: cancel}
	for i, store := range append([]string{cmd.Store}, cmd.With...) {
		side, err := d.side(ctx, p, store, cmd.Path, fmt.Sprintf("%s-s%d", cmd.Tag, i))
		if err != nil {
			cancel()
			return err
		}
		p.sides = append(p.sides, side)
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

// side builds one side of phase p: its store and wrapped handler (or the
// SDK floor), with order IDs of its own (tag), and for a replay makes the
// first call that the replays repeat.
func (d *goDriver) side(ctx context.Context, p *goPhase, store, path, tag string) (*goSide, error) {
	if d.http == nil {
		return nil, errors.New("prepare before init")
	}
	client, counter := d.client()
	s := &goSide{counter: counter, evs: make([]events.APIGatewayProxyRequest, chunk)}
	// first makes the first call that a replay phase repeats: the side's
	// own, so that its record is the one its replays find.
	var first func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	if store == "sdk" || store == "sdk-protocol" {
		f := &sdkFloor{client: client, table: d.init.Table, protocol: store == "sdk-protocol"}
		s.wrapped, first = f.first, f.first
		if path == "replay" {
			s.wrapped = f.replay
		}
	} else {
		st, err := d.store(store, client)
		if err != nil {
			return nil, err
		}
		s.wrapped, err = idempotency.Wrap(respond, st, idempotency.WithKey(key), idempotency.WithKeyPrefix("orders"))
		if err != nil {
			return nil, err
		}
		first = s.wrapped
	}
	if path == "first" {
		s.latencyID = func(i int) string { return tag + "-lat-" + strconv.Itoa(i) }
		s.cpuID = func(i int) string { return tag + "-cpu-" + strconv.Itoa(i) }
	} else {
		s.latencyID = func(int) string { return tag + "-replay" }
		s.cpuID = s.latencyID
	}
	var ev [1]events.APIGatewayProxyRequest
	if err := p.decode(ev[:], s.latencyID, 0); err != nil {
		return nil, err
	}
	if path == "replay" {
		// The first call, which the replays repeat.
		if _, err := first(ctx, ev[0]); err != nil {
			return nil, err
		}
	}
	counter.take()
	return s, nil
}

// run measures the phase. Its sides run in the same loops, interleaved,
// so that a change in the machine's speed (it is shared) weighs on all of
// them alike: in the latency loop each event goes to the bare handler and
// then to every side; in the CPU loop the bare handler and the sides take
// turns of a few calls (phaseCmd.Turn). Their order is shuffled anew for
// every event and every round of turns: a side's calls leave work behind
// them (garbage to collect, the connection's goroutines finishing), which
// the process's CPU time charges to whoever runs next, and in a fixed
// order (or one that only rotates) each side would always follow the
// same one, and pay for it.
func (d *goDriver) run() (runResult, error) {
	p := d.phase
	d.phase = nil
	defer p.cancel()
	if len(p.sides) == 1 {
		return p.runAlone()
	}
	n := p.n
	bareNs := make([]int64, n)
	for _, s := range p.sides {
		s.res = runResult{N: n, BareNs: bareNs, WrappedNs: make([]int64, n)}
	}
	bare := make([]events.APIGatewayProxyRequest, chunk)
	// The loops carry profiler labels, so that a profile (-cpuprofile) can
	// be narrowed to one, and the CPU loop's turns to a side: go tool pprof
	// -tagfocus loop=cpu -tagfocus side=1 (the sides are numbered from 0,
	// the bare handler's turns are side=bare).
	var turnLabels []context.Context
	loop := func(name string, orderID func(*goSide) func(int) string, do func(from int, batch int) error) (err error) {
		pprof.Do(p.ctx, pprof.Labels("phase", p.name, "loop", name), func(ctx context.Context) {
			turnLabels = turnLabels[:0]
			for i := range len(p.sides) + 1 {
				side := "bare"
				if i > 0 {
					side = strconv.Itoa(i - 1)
				}
				turnLabels = append(turnLabels, pprof.WithLabels(ctx, pprof.Labels("side", side)))
			}
			defer pprof.SetGoroutineLabels(ctx)
			for from := 0; from < n; from += chunk {
				size := min(chunk, n-from)
				for _, s := range p.sides {
					if err = p.decode(s.evs[:size], orderID(s), from); err != nil {
						return
					}
				}
				if err = p.decode(bare[:size], orderID(p.sides[0]), from); err != nil {
					return
				}
				if err = do(from, size); err != nil {
					return
				}
			}
		})
		return err
	}
	call := func(s *goSide, ev *events.APIGatewayProxyRequest) error {
		out, err := s.wrapped(p.ctx, *ev)
		if err != nil {
			return err
		}
		if out.StatusCode != 201 {
			return fmt.Errorf("unexpected response %+v", out)
		}
		return nil
	}
	k := len(p.sides)
	// A fixed seed: the same order in every run.
	rng := rand.New(rand.NewPCG(uint64(n), uint64(k)))
	order := make([]int, k+1) // the CPU loop's turns: 0 is the bare handler's, i the side i-1's
	for i := range order {
		order[i] = i
	}
	sides := make([]int, k) // the latency loop's
	for i := range sides {
		sides[i] = i
	}
	err := loop("latency", func(s *goSide) func(int) string { return s.latencyID }, func(from, size int) error {
		for j := range size {
			i := from + j
			t0 := time.Now()
			_, _ = respond(p.ctx, bare[j])
			bareNs[i] = int64(time.Since(t0))
			rng.Shuffle(k, func(a, b int) { sides[a], sides[b] = sides[b], sides[a] })
			for _, r := range sides {
				s := p.sides[r]
				t1 := time.Now()
				err := call(s, &s.evs[j])
				s.res.WrappedNs[i] = int64(time.Since(t1))
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return runResult{}, err
	}
	// The CPU loop reads the clocks around each turn only, not around the
	// decoding of the next chunk. Turn 0 is the bare handler's.
	err = loop("cpu", func(s *goSide) func(int) string { return s.cpuID }, func(from, size int) error {
		for lo := 0; lo < size; lo += p.turn {
			hi := min(lo+p.turn, size)
			rng.Shuffle(k+1, func(a, b int) { order[a], order[b] = order[b], order[a] })
			for _, t := range order {
				pprof.SetGoroutineLabels(turnLabels[t])
				cpu0, wall0 := threadsCPU(), time.Now()
				if t == 0 {
					for j := lo; j < hi; j++ {
						_, _ = respond(p.ctx, bare[j])
					}
					cpu, wall := threadsCPU()-cpu0, int64(time.Since(wall0))
					for _, s := range p.sides {
						s.res.CPUBareNs += cpu
						s.res.WallBareNs += wall
					}
					continue
				}
				s := p.sides[t-1]
				for j := lo; j < hi; j++ {
					if err := call(s, &s.evs[j]); err != nil {
						return err
					}
				}
				s.res.CPUWrappedNs += threadsCPU() - cpu0
				s.res.WallWrappedNs += int64(time.Since(wall0))
			}
		}
		return nil
	})
	res := p.sides[0].res
	for i, s := range p.sides {
		s.res.Requests, s.res.RequestBytes = s.counter.take()
		if i == 0 {
			res = s.res
		} else {
			res.With = append(res.With, s.res)
		}
	}
	return res, err
}

// runAlone measures a phase of one side, as the Node driver measures its
// phases: the latency loop, then the bare handler's CPU loop, then the
// wrapped handler's, each reading the process's CPU time (getrusage)
// around every chunk of calls. The side runs alone in its loops, as the
// Node side does, so that the two are measured alike.
func (p *goPhase) runAlone() (runResult, error) {
	n, side := p.n, p.sides[0]
	res := runResult{N: n, BareNs: make([]int64, n), WrappedNs: make([]int64, n)}
	evs := side.evs
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
	err := loop("latency", side.latencyID, func(i int, ev *events.APIGatewayProxyRequest) error {
		t0 := time.Now()
		_, _ = respond(p.ctx, *ev)
		t1 := time.Now()
		out, err := side.wrapped(p.ctx, *ev)
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
	// around the decoding of the next chunk. A loop is one side's alone,
	// so that a thread's run time that getrusage shows late (see
	// threadsCPU) shows within the same loop.
	var cpu0 int64
	var wall0 time.Time
	timed := func(cpu, wall *int64, call func(*events.APIGatewayProxyRequest) error) func(int, *events.APIGatewayProxyRequest) error {
		return func(i int, ev *events.APIGatewayProxyRequest) error {
			if i%chunk == 0 {
				cpu0, wall0 = processCPU(), time.Now()
			}
			err := call(ev)
			if i%chunk == chunk-1 || i == n-1 {
				*cpu += processCPU() - cpu0
				*wall += int64(time.Since(wall0))
			}
			return err
		}
	}
	_ = loop("cpu-bare", side.cpuID, timed(&res.CPUBareNs, &res.WallBareNs, func(ev *events.APIGatewayProxyRequest) error {
		_, _ = respond(p.ctx, *ev)
		return nil
	}))
	err = loop("cpu-wrapped", side.cpuID, timed(&res.CPUWrappedNs, &res.WallWrappedNs, func(ev *events.APIGatewayProxyRequest) error {
		_, err := side.wrapped(p.ctx, *ev)
		return err
	}))
	res.Requests, res.RequestBytes = side.counter.take()
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
//
// With protocol set it is the protocol's floor instead: the same requests
// as the library's, made directly, byte for byte but for the values that
// change from call to call (the owner token, the key's hash, the times),
// each as long as the library's. Its item has the owner token and the
// in-progress expiry, and
// its conditions are docs/protocol.md's (reserve: no record, or one that
// expired, or one that lapsed and is not held; complete: the caller's own
// token, in progress), written as persistence/dynamodb writes them. What
// the library costs over this floor is its code; what this floor costs
// over the plain one is the request shape the guarantees need.
type sdkFloor struct {
	client   *awsdynamodb.Client
	table    string
	protocol bool
	tokens   uint64 // the protocol floor's owner tokens, counted
}

// The protocol floor's expressions: persistence/dynamodb's, with its
// default attribute names.
var (
	protocolReserveCondition  = "attribute_not_exists(#k) OR #e < :now OR #s = :p AND #i < :now_ms AND attribute_not_exists(#h)"
	protocolCompleteCondition = "#t = :t AND #s = :p"
	protocolCompletion        = "SET #e = :e, #s = :s, #i = :i, #d = :d REMOVE #h"
)

// token returns an owner token as long as the library's (26 characters of
// base32), made from a counter: the library's random one is its own cost.
func (f *sdkFloor) token() string {
	f.tokens++
	return fmt.Sprintf("%026d", f.tokens)
}

// expiries returns the record's expiry (whole seconds) and its in-progress
// expiry (the invocation's deadline, in milliseconds), as the library
// writes them.
func expiries(ctx context.Context, now time.Time) (expiry, inProgress string) {
	deadline, _ := ctx.Deadline()
	return strconv.FormatInt(now.Add(time.Hour).Unix(), 10), strconv.FormatInt(deadline.UnixMilli(), 10)
}

func (f *sdkFloor) key(ev events.APIGatewayProxyRequest) map[string]types.AttributeValue {
	sum := sha256.Sum256([]byte(ev.Body))
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "orders#" + hex.EncodeToString(sum[:])}}
}

// put is the reservation: an item with the key, a status and an expiry
// (the protocol floor's: reserve). It returns the item.
func (f *sdkFloor) put(ctx context.Context, ev events.APIGatewayProxyRequest) (map[string]types.AttributeValue, error) {
	if f.protocol {
		return f.reserve(ctx, ev)
	}
	item := f.key(ev)
	item["status"] = &types.AttributeValueMemberS{Value: "INPROGRESS"}
	item["expiration"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}
	_, err := f.client.PutItem(ctx, &awsdynamodb.PutItemInput{
		TableName:                           &f.table,
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(id)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return item, err
}

// reserve is the protocol floor's reservation: the library's PutItem. It
// returns the item's owner token and expiries, for the completion.
func (f *sdkFloor) reserve(ctx context.Context, ev events.APIGatewayProxyRequest) (item map[string]types.AttributeValue, err error) {
	now := time.Now()
	expiry, inProgress := expiries(ctx, now)
	item = f.key(ev)
	item["expiration"] = &types.AttributeValueMemberN{Value: expiry}
	item["status"] = &types.AttributeValueMemberS{Value: "INPROGRESS"}
	item["owner_token"] = &types.AttributeValueMemberS{Value: f.token()}
	item["in_progress_expiration"] = &types.AttributeValueMemberN{Value: inProgress}
	_, err = f.client.PutItem(ctx, &awsdynamodb.PutItemInput{
		TableName:                &f.table,
		Item:                     item,
		ConditionExpression:      &protocolReserveCondition,
		ExpressionAttributeNames: map[string]string{"#e": "expiration", "#s": "status", "#i": "in_progress_expiration", "#h": "held", "#k": "id"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p":      &types.AttributeValueMemberS{Value: "INPROGRESS"},
			":now":    &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Second-1).Unix(), 10)},
			":now_ms": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Millisecond-1).UnixMilli(), 10)},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return item, err
}

// complete stores the response: an UpdateItem of the status and the
// response (the protocol floor's: the library's UpdateItem, on the
// reservation's token, with its expiries).
func (f *sdkFloor) complete(ctx context.Context, ev events.APIGatewayProxyRequest, reserved map[string]types.AttributeValue, data []byte) error {
	in := &awsdynamodb.UpdateItemInput{TableName: &f.table, Key: f.key(ev)}
	if f.protocol {
		in.ConditionExpression = &protocolCompleteCondition
		in.UpdateExpression = &protocolCompletion
		in.ExpressionAttributeNames = map[string]string{"#h": "held", "#t": "owner_token", "#e": "expiration", "#s": "status", "#i": "in_progress_expiration", "#d": "data"}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberS{Value: "INPROGRESS"},
			":e": reserved["expiration"],
			":s": &types.AttributeValueMemberS{Value: "COMPLETED"},
			":t": reserved["owner_token"],
			":i": reserved["in_progress_expiration"],
			":d": &types.AttributeValueMemberS{Value: string(data)},
		}
	} else {
		in.UpdateExpression = aws.String("SET #s = :s, #d = :d")
		in.ExpressionAttributeNames = map[string]string{"#s": "status", "#d": "data"}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":s": &types.AttributeValueMemberS{Value: "COMPLETED"},
			":d": &types.AttributeValueMemberS{Value: string(data)},
		}
	}
	_, err := f.client.UpdateItem(ctx, in)
	return err
}

func (f *sdkFloor) first(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	reserved, err := f.put(ctx, ev)
	if err != nil {
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
	return resp, f.complete(ctx, ev, reserved, data)
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
