// Command compare runs the same idempotent workload through this library and
// through Powertools for AWS Lambda (TypeScript), side by side, and writes a
// markdown table and an SVG chart of the results.
//
// Both sides wrap the same bare API Gateway handler, select the key with
// powertools_json(body).order_id, and run the same events (a 1 KB API
// Gateway REST event, testdata/event.json), the same number of times, in
// rounds that alternate between them, against one dynalite that this
// command starts, through one counting proxy that it starts in front of it.
// Each side runs in a process of its own (this binary again for Go, with
// RETRYSAFE_COMPARE_DRIVER=1 in its environment;
// node/driver.mjs for Node), so that its CPU time is its own.
//
// Per invocation it measures the latency added over the bare handler (a
// first call with a new key, and a replay of a completed key: median and
// 99th percentile), the DynamoDB requests, and the CPU time of the client
// process, with an in-memory store on both sides and with DynamoDB.
//
// Usage, from the repository (make compare installs the Node packages and
// runs it):
//
//	npm ci && (cd bench/compare/node && npm ci)
//	go -C bench/compare run . [-rounds 7] [-out results]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/retrysafe/retrysafe/internal/testing/dynalite"
	"github.com/retrysafe/retrysafe/internal/testing/dynamodblocal"
	"github.com/retrysafe/retrysafe/internal/testing/testenv"
	"github.com/retrysafe/retrysafe/internal/testing/testevents"
	"github.com/retrysafe/retrysafe/persistence/dynamodb"
)

// phases are the measured workloads, in the order each round runs them.
var phases = []phase{
	{"memory", "first"},
	{"memory", "replay"},
	{"dynamodb", "first"},
	{"dynamodb", "replay"},
	{"cached", "replay"},
}

type options struct {
	rounds    int
	warmup    int
	nMemory   int
	nDynamoDB int
	turn      int
	out       string
	server    string // serverDynalite or serverDynamoDBLocal
	allOld    bool
	node      string
	// cpuProfile, when set, is passed on to the Go driver, as an absolute
	// path.
	cpuProfile string
}

// The servers the comparison runs against (-server).
const (
	serverDynalite      = "dynalite"
	serverDynamoDBLocal = "dynamodb-local"
)

// driverEnv, set to 1 in the environment, makes this binary (or a test
// binary of this package) the Go driver instead of the harness; driverProfileEnv
// names a file for the driver's CPU profile.
const (
	driverEnv        = "RETRYSAFE_COMPARE_DRIVER"
	driverProfileEnv = "RETRYSAFE_COMPARE_CPUPROFILE"
)

func main() {
	if os.Getenv(driverEnv) == "1" {
		driverMain()
		return
	}
	var o options
	flag.IntVar(&o.rounds, "rounds", 9, "measured rounds")
	flag.IntVar(&o.warmup, "warmup", 1, "rounds run first and not counted (JIT warm-up, connections)")
	flag.IntVar(&o.nMemory, "n-memory", 10000, "invocations per loop with the in-memory store")
	flag.IntVar(&o.nDynamoDB, "n-dynamodb", 800, "invocations per loop with DynamoDB")
	flag.IntVar(&o.turn, "turn", 8, "calls per side and turn in the Go driver's CPU loop, where the sides take turns (at most 64)")
	flag.StringVar(&o.out, "out", "", "directory for compare.md, compare.svg and compare.json (default results, or results/dynamodb-local with -server dynamodb-local; make compare runs in bench/compare)")
	flag.StringVar(&o.server, "server", serverDynalite, "the DynamoDB server: dynalite (Node.js), or dynamodb-local (DynamoDB Local, Java: make dynamodb-local), which returns ALL_OLD itself")
	flag.BoolVar(&o.allOld, "all-old", true, "with dynalite, make the proxy return the existing item on a failed conditional PutItem, as DynamoDB does and dynalite does not")
	flag.StringVar(&o.node, "node", "node", "the Node.js executable")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the Go driver to this file (go tool pprof reads it)")
	renderFrom := flag.String("render", "", "run nothing: write compare.md and compare.svg to -out again from this compare.json")
	flag.Parse()
	if o.out == "" {
		o.out = map[string]string{serverDynamoDBLocal: filepath.Join("results", "dynamodb-local")}[o.server]
		if o.out == "" {
			o.out = "results"
		}
	}

	log.SetFlags(0)
	log.SetPrefix("compare: ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rep *report
	var err error
	if *renderFrom != "" {
		rep, err = render(*renderFrom, o.out)
	} else {
		rep, err = run(ctx, o, os.Stderr)
	}
	if err != nil {
		stop()
		log.Fatal(err)
	}
	fmt.Print(rep.markdown())
}

// driverMain serves the driver protocol on stdin and stdout.
func driverMain() {
	if path := os.Getenv(driverProfileEnv); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
	}
	if err := runDriver(os.Stdin, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run runs the comparison, logs its progress to logw, writes the results to
// o.out and returns them.
func run(ctx context.Context, o options, logw io.Writer) (*report, error) {
	logger := log.New(logw, "compare: ", 0)
	if o.rounds < 1 || o.nMemory < 1 || o.nDynamoDB < 1 {
		return nil, errors.New("-rounds, -n-memory and -n-dynamodb must be positive")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	nodeDir := filepath.Join(root, "bench", "compare", "node")
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "@aws-lambda-powertools", "idempotency")); err != nil {
		return nil, fmt.Errorf("Powertools is not installed: run `npm ci` in %s (make compare does)", nodeDir)
	}
	event, err := os.ReadFile(filepath.Join(root, "bench", "compare", "testdata", "event.json"))
	if err != nil {
		return nil, err
	}

	srv, err := startServer(ctx, o.server)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	// DynamoDB Local returns ALL_OLD itself: the proxy then rewrites
	// nothing.
	allOld := o.allOld && !srv.nativeAllOld
	table := "idempotency"
	if err := createTable(ctx, srv.client, table); err != nil {
		return nil, err
	}
	px, err := newProxy(srv.endpoint, []string{"id"}, allOld)
	if err != nil {
		return nil, err
	}
	defer px.Close()

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	init := command{Op: "init", initCmd: initCmd{Endpoint: px.URL(), Region: dynalite.Region, Table: table, Event: string(event)}}
	goCmd := exec.CommandContext(ctx, self)
	goCmd.Env = append(os.Environ(), driverEnv+"=1")
	if o.cpuProfile != "" {
		abs, err := filepath.Abs(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		goCmd.Env = append(goCmd.Env, driverProfileEnv+"="+abs)
	}
	ours, err := startDriver(ctx, "retrysafe", goCmd, init)
	if err != nil {
		return nil, err
	}
	defer ours.close()
	if rev := gitRevision(ctx, root); rev != "" {
		// go run does not stamp the build with its revision.
		ours.info = strings.Replace(ours.info, "(devel)", rev, 1)
	}
	node := exec.CommandContext(ctx, o.node, "--expose-gc", "--no-warnings", filepath.Join(nodeDir, "driver.mjs"))
	node.Dir = nodeDir
	theirs, err := startDriver(ctx, "Powertools", node, init)
	if err != nil {
		return nil, err
	}
	defer theirs.close()
	// In the DynamoDB phases the Go driver runs two more sides in the same
	// loops as this library, interleaved with it: the SDK floor, the same
	// DynamoDB requests made directly (driver.go, sdkFloor), and the floor
	// again, the A/A check: what the floor measures against itself is the
	// measurement's own error; and the protocol's floor, the library's own
	// requests made directly, which parts the library's cost over the floor
	// into its requests' and its code's.
	sides := []*driverProc{ours, theirs}

	results := map[phase][sideCount][]round{}
	total := o.warmup + o.rounds
	for r := range total {
		for _, ph := range phases {
			n := o.nDynamoDB
			if ph.Store == "memory" {
				n = o.nMemory
			}
			// Alternate which side goes first, so that neither always runs
			// on the heels of the other.
			// The floor's run (this library and the floor twice, in
			// the same loops) comes last in the DynamoDB phases.
			order := []int{0, 1}
			if r%2 == 1 {
				slices.Reverse(order)
			}
			if ph.Store == "dynamodb" {
				order = append(order, 2)
			}
			var got [sideCount]round
			for _, i := range order {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				tag := fmt.Sprintf("%s-r%d-%s-%s", []string{"go", "node", "floor"}[i], r, ph.Store, ph.Path)
				cmd := phaseCmd{Store: ph.Store, Path: ph.Path, N: n, Tag: tag, Turn: o.turn}
				if i == 2 {
					cmd.With = []string{"sdk", "sdk", "sdk-protocol"} // sideFloor, sideFloorAA, sideProtocolFloor
				}
				drv := sides[0] // this library's driver, which also runs the floor
				if i == 1 {
					drv = sides[1]
				}
				rds, err := drv.phase(px, cmd)
				if err != nil {
					return nil, fmt.Errorf("%s, round %d, %s: %w", []string{"retrysafe", "Powertools", "SDK floor"}[i], r, ph.NameOn(o.server), err)
				}
				switch i {
				case 0:
					got[sideOurs] = rds[0]
				case 1:
					got[sideTheirs] = rds[0]
				case 2:
					got[sideOursWithFloor], got[sideFloor], got[sideFloorAA], got[sideProtocolFloor] = rds[0], rds[1], rds[2], rds[3]
				}
			}
			warm := r < o.warmup
			logger.Printf("round %d/%d%s %-36s retrysafe %9s (%.2f req)  Powertools %9s (%.2f req)",
				r+1, total, map[bool]string{true: " (warm-up)"}[warm], ph.NameOn(o.server),
				fmtNs(percentile(got[0].AddedNs, 0.5)), got[0].Requests, fmtNs(percentile(got[1].AddedNs, 0.5)), got[1].Requests)
			if ph.Store == "dynamodb" {
				floor := (got[sideFloor].CPUAddedNs + got[sideFloorAA].CPUAddedNs) / 2
				logger.Printf("%*s CPU over the SDK floor %.3f×, floor over floor (A/A) %.3f×; the protocol's floor over the floor %.3f×, the library over it %.3f×", 52, "",
					div(got[sideOursWithFloor].CPUAddedNs, floor), div(got[sideFloorAA].CPUAddedNs, got[sideFloor].CPUAddedNs),
					div(got[sideProtocolFloor].CPUAddedNs, floor), div(got[sideOursWithFloor].CPUAddedNs, got[sideProtocolFloor].CPUAddedNs))
			}
			if !warm {
				rs := results[ph]
				for i := range got {
					if got[i].AddedNs != nil {
						rs[i] = append(rs[i], got[i])
					}
				}
				results[ph] = rs
			}
		}
	}

	// The capacity phase: each side's calls with responses of several
	// sizes, metered by the proxy, unmeasured otherwise.
	capacity, err := measureCapacity(px, sides, func(n int) string { return string(testevents.OrdersResponse(n)) })
	if err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	for _, c := range capacity {
		logger.Printf("capacity, %6d-byte response: retrysafe %g units first, %g replay; Powertools %g, %g",
			c.Size, c.Ours.First, c.Ours.Replay, c.Theirs.First, c.Theirs.Replay)
	}

	rep := report{
		Capacity:     capacity,
		Date:         time.Now().UTC().Format(time.RFC3339),
		Machine:      machine(),
		Ours:         ours.info,
		Theirs:       theirs.info,
		Dynalite:     srv.version,
		AllOld:       allOld,
		NativeAllOld: srv.nativeAllOld,
		Rounds:       o.rounds,
		Warmup:       o.warmup,
		NMemory:      o.nMemory,
		NDynamoDB:    o.nDynamoDB,
		EventBytes:   compactSize(event),
	}
	for _, ph := range phases {
		rs := results[ph]
		n := o.nDynamoDB
		if ph.Store == "memory" {
			n = o.nMemory
		}
		ours, theirs := summarize(rs[sideOurs], 2*n), summarize(rs[sideTheirs], 2*n)
		w := row{Phase: ph, Name: ph.NameOn(o.server), Ours: ours, Theirs: theirs, Ratios: compare(ours, theirs)}
		if len(rs[sideFloor]) > 0 {
			// The floor is both of its runs, pooled: this library is
			// compared with their mean in each round, which halves what
			// one run's noise makes of the ratio. The A/A check is the
			// second run over the first.
			floor := summarize(pool(rs[sideFloor], rs[sideFloorAA]), 2*n)
			withFloor := summarize(rs[sideOursWithFloor], 2*n)
			one, aa := summarize(rs[sideFloor], 2*n), summarize(rs[sideFloorAA], 2*n)
			over, overAA := compare(floor, withFloor), compare(one, aa)
			w.OursWithFloor, w.Floor, w.OverFloor, w.FloorAA = &withFloor, &floor, &over, &overAA
			if len(rs[sideProtocolFloor]) > 0 {
				protocol := summarize(rs[sideProtocolFloor], 2*n)
				overFloor, overProtocol := compare(floor, protocol), compare(protocol, withFloor)
				w.ProtocolFloor, w.ProtocolOverFloor, w.OverProtocolFloor = &protocol, &overFloor, &overProtocol
			}
		}
		rep.Rows = append(rep.Rows, w)
	}
	rep.check()
	if err := rep.write(o.out); err != nil {
		return nil, err
	}
	return &rep, nil
}

// pool merges the rounds of two runs of one side, round by round: their
// invocations together, their CPU and wall time per invocation averaged,
// their requests (which are alike) from the first.
func pool(a, b []round) []round {
	out := make([]round, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i]
		out[i].AddedNs = append(slices.Clip(a[i].AddedNs), b[i].AddedNs...)
		out[i].BareNs = append(slices.Clip(a[i].BareNs), b[i].BareNs...)
		out[i].CPUAddedNs = (a[i].CPUAddedNs + b[i].CPUAddedNs) / 2
		out[i].WallAddedNs = (a[i].WallAddedNs + b[i].WallAddedNs) / 2
	}
	return out
}

// startCPUProfile profiles the process until the returned function is
// called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func createTable(ctx context.Context, client *awsdynamodb.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return dynamodb.CreateTable(ctx, client, name)
}

// server is the DynamoDB server of a run.
type server struct {
	endpoint, version string
	nativeAllOld      bool // it returns the existing item of a failed conditional write
	client            *awsdynamodb.Client
	Stop              func() error
}

// startServer starts the server that -server names.
func startServer(ctx context.Context, name string) (*server, error) {
	switch name {
	case serverDynalite:
		srv, err := dynalite.StartContext(ctx)
		if err != nil {
			return nil, err
		}
		return &server{endpoint: srv.Endpoint, version: "dynalite " + srv.Version, client: srv.NewClient(), Stop: srv.Stop}, nil
	case serverDynamoDBLocal:
		srv, err := dynamodblocal.StartContext(ctx)
		if err != nil {
			return nil, err
		}
		return &server{endpoint: srv.Endpoint, version: "DynamoDB Local " + srv.Version, nativeAllOld: true, client: srv.NewClient(), Stop: srv.Stop}, nil
	}
	return nil, fmt.Errorf("-server %q: want %s or %s", name, serverDynalite, serverDynamoDBLocal)
}

// driverProc is a running driver.
type driverProc struct {
	name string
	info string // runtime and library versions
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	enc  *json.Encoder
}

func startDriver(ctx context.Context, name string, cmd *exec.Cmd, init command) (*driverProc, error) {
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 10 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s driver: %w", name, err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<20), 64<<20)
	d := &driverProc{name: name, cmd: cmd, in: in, out: sc, enc: json.NewEncoder(in)}
	rep, err := d.call(init)
	if err != nil {
		d.close()
		return nil, err
	}
	d.info = rep.Library + ", " + rep.Runtime
	return d, nil
}

func (d *driverProc) call(cmd command) (reply, error) {
	if err := d.enc.Encode(cmd); err != nil {
		return reply{}, fmt.Errorf("%s driver: %w", d.name, err)
	}
	if !d.out.Scan() {
		err := d.out.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return reply{}, fmt.Errorf("%s driver: %w", d.name, err)
	}
	var rep reply
	if err := json.Unmarshal(d.out.Bytes(), &rep); err != nil {
		return reply{}, fmt.Errorf("%s driver: %w", d.name, err)
	}
	if rep.Error != "" {
		return reply{}, fmt.Errorf("%s driver: %s", d.name, rep.Error)
	}
	return rep, nil
}

// The sides of a phase, as run and summarized: this library and
// Powertools, each alone in its loops; and in the DynamoDB phases the
// floor's run: this library, the SDK floor, the floor again (A/A) and the
// protocol's floor, interleaved in the same loops.
const (
	sideOurs = iota
	sideTheirs
	sideOursWithFloor
	sideFloor
	sideFloorAA
	sideProtocolFloor
	sideCount
)

// phase prepares and runs one phase, with the sides of ph.With, and
// returns a round per side. The proxy counts the requests of the run
// alone; when the driver counts its sides' requests itself (the Go
// driver), those are the sides' counts, and must add up to the proxy's.
func (d *driverProc) phase(px *proxy, ph phaseCmd) ([]round, error) {
	if _, err := d.call(command{Op: "prepare", phaseCmd: ph}); err != nil {
		return nil, err
	}
	before, bytesBefore := px.Snapshot(), px.Bytes()
	rep, err := d.call(command{Op: "run"})
	if err != nil {
		return nil, err
	}
	after, bytesAfter := px.Snapshot(), px.Bytes()
	results := append([]runResult{rep.runResult}, rep.With...)
	if len(results) != 1+len(ph.With) {
		return nil, fmt.Errorf("%s driver ran %d sides, want %d", d.name, len(results), 1+len(ph.With))
	}
	var rounds []round
	counted := map[string]int64{}
	var countedBytes int64
	for _, res := range results {
		if res.N != ph.N || len(res.BareNs) != ph.N || len(res.WrappedNs) != ph.N {
			return nil, fmt.Errorf("%s driver ran %d invocations, want %d", d.name, res.N, ph.N)
		}
		r := round{BareNs: res.BareNs, AddedNs: make([]int64, ph.N)}
		for i := range res.WrappedNs {
			r.AddedNs[i] = res.WrappedNs[i] - res.BareNs[i]
		}
		r.CPUAddedNs = float64(res.CPUWrappedNs-res.CPUBareNs) / float64(ph.N)
		r.WallAddedNs = float64(res.WallWrappedNs-res.WallBareNs) / float64(ph.N)
		// The latency loop and the CPU loop each call the wrapped handler N times.
		if res.Requests != nil {
			mine := map[string]int{}
			for op, n := range res.Requests {
				mine[op] = int(n)
				counted[op] += n
			}
			r.Requests, r.RequestsOps = perOp(nil, mine, 2*ph.N)
			r.RequestBytes = float64(res.RequestBytes) / float64(2*ph.N)
			countedBytes += res.RequestBytes
		} else {
			r.Requests, r.RequestsOps = perOp(before, after, 2*ph.N)
			r.RequestBytes = float64(bytesAfter-bytesBefore) / float64(2*ph.N)
		}
		rounds = append(rounds, r)
	}
	if rep.Requests != nil {
		for op, n := range after {
			if seen := int64(n - before[op]); seen != counted[op] {
				return nil, fmt.Errorf("%s driver counted %d %s requests, the proxy %d", d.name, counted[op], op, seen)
			}
		}
		if seen := int64(bytesAfter - bytesBefore); seen != countedBytes {
			return nil, fmt.Errorf("%s driver counted %d request bytes, the proxy %d", d.name, countedBytes, seen)
		}
	}
	return rounds, nil
}

// close asks the driver to exit and waits for it; the context of its
// command kills it if the harness is interrupted.
func (d *driverProc) close() {
	_ = d.enc.Encode(command{Op: "exit"})
	_ = d.in.Close()
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

// gitRevision returns the checkout's short commit, with "+dirty" when it
// has changes, or "" when git cannot tell.
func gitRevision(ctx context.Context, dir string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if exec.CommandContext(ctx, "git", "-C", dir, "diff", "--quiet", "HEAD").Run() != nil {
		rev += "+dirty"
	}
	return rev
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return cpu + ", " + strconv.Itoa(runtime.NumCPU()) + " cores, " + runtime.GOOS + "/" + runtime.GOARCH
}

func compactSize(b []byte) int {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return len(b)
	}
	c, _ := json.Marshal(v)
	return len(c)
}
