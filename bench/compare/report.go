package main

import (
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// report is a comparison run: its set-up, a row per phase, and the targets
// checked.
type report struct {
	Date     string `json:"date"`
	Machine  string `json:"machine"`
	Ours     string `json:"retrysafe"`
	Theirs   string `json:"powertools"`
	Dynalite string `json:"server"`
	AllOld   bool   `json:"all_old_emulated"`
	// NativeAllOld is set when the server returns the existing item of a
	// failed conditional write itself (DynamoDB Local).
	NativeAllOld bool     `json:"all_old_native,omitempty"`
	Rounds       int      `json:"rounds"`
	Warmup       int      `json:"warmup_rounds"`
	NMemory      int      `json:"invocations_per_loop_memory"`
	NDynamoDB    int      `json:"invocations_per_loop_dynamodb"`
	EventBytes   int      `json:"event_bytes"`
	Rows         []row    `json:"rows"`
	Targets      []target `json:"targets"`
	// Capacity is the capacity units of a first call and a replay, by
	// response size (capacity.go).
	Capacity []capacityRow `json:"capacity,omitempty"`
}

type row struct {
	Phase  phase   `json:"phase"`
	Name   string  `json:"name"`
	Ours   summary `json:"retrysafe"`
	Theirs summary `json:"powertools"`
	Ratios ratios  `json:"powertools_over_retrysafe"`
	// Floor is the same DynamoDB requests made directly with the SDK, and
	// OverFloor this library's numbers over the floor's (DynamoDB rows).
	Floor     *summary `json:"sdk_floor,omitempty"`
	OverFloor *ratios  `json:"retrysafe_over_sdk_floor,omitempty"`
	// OursWithFloor is this library in the floor's run, where it shares
	// the loops with the floor: what OverFloor compares.
	OursWithFloor *summary `json:"retrysafe_with_sdk_floor,omitempty"`
	// FloorAA is the floor over itself: a second SDK floor run in the
	// same loops, whose ratio to the first is the measurement's own
	// error (the A/A check).
	FloorAA *ratios `json:"sdk_floor_aa,omitempty"`
	// ProtocolFloor is the protocol's floor: the library's own requests,
	// made directly with the SDK (sdkFloor with protocol set).
	// ProtocolOverFloor is its numbers over the SDK floor's: what the
	// request shape the guarantees need costs; OverProtocolFloor this
	// library's over it: what the library's code costs.
	ProtocolFloor     *summary `json:"protocol_floor,omitempty"`
	ProtocolOverFloor *ratios  `json:"protocol_floor_over_sdk_floor,omitempty"`
	OverProtocolFloor *ratios  `json:"retrysafe_over_protocol_floor,omitempty"`
}

// aaTolerance is how far from 1 the A/A check (the floor over itself) may
// be for the ratios over the floor to be trusted.
const aaTolerance = 0.03

type target struct {
	What string `json:"what"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// check evaluates the targets against the rows.
func (r *report) check() {
	r.Targets = nil
	for _, w := range r.Rows {
		switch w.Phase.Store {
		case "memory":
			r.Targets = append(r.Targets,
				target{"in-memory overhead at least 5× lower than Powertools' (median added latency), " + w.Phase.Path, fmt.Sprintf("%.1f×", w.Ratios.Median), w.Ratios.Median >= 5},
				target{"in-memory overhead at least 4× lower than Powertools' (CPU per invocation), " + w.Phase.Path, fmt.Sprintf("%.1f×", w.Ratios.CPU), w.Ratios.CPU >= 4},
			)
		case "dynamodb":
			r.Targets = append(r.Targets,
				target{"DynamoDB: at least 1.4× lower latency than Powertools (median), " + w.Phase.Path, fmt.Sprintf("%.1f×", w.Ratios.Median), w.Ratios.Median >= 1.4},
				target{"DynamoDB: at least 3× lower CPU than Powertools (per invocation), " + w.Phase.Path, fmt.Sprintf("%.1f×", w.Ratios.CPU), w.Ratios.CPU >= 3},
			)
		}
	}
	for _, w := range r.Rows {
		if w.Phase.Store == "memory" {
			continue
		}
		want := map[string]float64{"dynamodb/first": 2, "dynamodb/replay": 1, "cached/replay": 0}[w.Phase.Store+"/"+w.Phase.Path]
		if w.Phase.Store == "dynamodb" && w.Phase.Path == "replay" && !r.AllOld && !r.NativeAllOld {
			want = 2 // dynalite ignores ALL_OLD: the conflict is read with a GetItem
		}
		r.Targets = append(r.Targets,
			target{fmt.Sprintf("%s: DynamoDB requests per invocation, %g", w.Name, want), fmt.Sprintf("%.2f", w.Ours.Requests), math.Abs(w.Ours.Requests-want) < 0.005},
			target{w.Name + ": no more requests than Powertools", fmt.Sprintf("%.2f vs %.2f", w.Ours.Requests, w.Theirs.Requests), w.Ours.Requests <= w.Theirs.Requests+0.005},
		)
		if w.Floor != nil {
			limit := map[string]float64{"first": 1.10, "replay": 1.05}[w.Phase.Path]
			r.Targets = append(r.Targets,
				target{fmt.Sprintf("%s: CPU per invocation at most %.2f× the SDK floor's", w.Name, limit), fmt.Sprintf("%.2f×", float64(w.OverFloor.CPU)), float64(w.OverFloor.CPU) <= limit},
				target{w.Name + ": as many requests as the SDK floor", fmt.Sprintf("%.2f vs %.2f", w.Ours.Requests, w.Floor.Requests), math.Abs(w.Ours.Requests-w.Floor.Requests) < 0.005},
			)
		}
		if w.FloorAA != nil {
			r.Targets = append(r.Targets,
				target{fmt.Sprintf("%s: A/A check, the SDK floor over itself within ±%.0f%%", w.Name, 100*aaTolerance),
					fmt.Sprintf("%.3f× (rounds %s)", float64(w.FloorAA.CPU), fmtSpread(*w.FloorAA)), math.Abs(float64(w.FloorAA.CPU)-1) <= aaTolerance})
		}
	}
}

// inFloorRun returns this library's numbers from the floor's run, where it
// shares the loops with the floors, or from its own run without one.
func (w row) inFloorRun() summary {
	if w.OursWithFloor != nil {
		return *w.OursWithFloor
	}
	return w.Ours
}

// hasProtocolFloor reports whether the rows carry the protocol's floor.
func (r *report) hasProtocolFloor() bool {
	for _, w := range r.Rows {
		if w.ProtocolFloor != nil {
			return true
		}
	}
	return false
}

// hasFloor reports whether the rows carry the SDK floor.
func (r *report) hasFloor() bool {
	for _, w := range r.Rows {
		if w.Floor != nil {
			return true
		}
	}
	return false
}

// render reads a report from a compare.json and writes it to dir again,
// with the targets checked anew, so that the presentation can change
// without running the comparison again.
func render(jsonPath, dir string) (*report, error) {
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, err
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", jsonPath, err)
	}
	r.check()
	return &r, r.write(dir)
}

func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"compare.json": append(js, '\n'),
		"compare.md":   []byte(r.markdown()),
		"compare.svg":  []byte(r.svg()),
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fmtBytes formats a size: "100 B", "8 KB".
func fmtBytes(n int) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%d KB", n>>10)
}

// fmtNs formats a duration in nanoseconds with three significant digits.
func fmtNs[T ~float64](v T) string {
	ns := float64(v)
	switch {
	case math.IsNaN(ns):
		return "n/a"
	case math.Abs(ns) >= 1e6:
		return sig(ns/1e6) + " ms"
	case math.Abs(ns) >= 1e3:
		return sig(ns/1e3) + " µs"
	}
	return sig(ns) + " ns"
}

// fmtTick formats a power of ten of nanoseconds as an axis label: "1 µs",
// "100 ms".
func fmtTick(ns float64) string {
	for _, u := range []struct {
		scale float64
		name  string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}} {
		if ns >= u.scale {
			return fmt.Sprintf("%g %s", ns/u.scale, u.name)
		}
	}
	return fmt.Sprintf("%g ns", ns)
}

func sig(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtRatio[T ~float64](v T) string {
	x := float64(v)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.1f×", x)
}

// fmtNearOne formats a ratio close to 1 with two decimals.
func fmtNearOne(v num) string {
	x := float64(v)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", x)
}

// fmtSpread formats the lowest and highest round's CPU ratio: "1.02–1.06".
func fmtSpread(r ratios) string {
	lo, hi := float64(r.CPUMin), float64(r.CPUMax)
	if math.IsNaN(lo) || math.IsNaN(hi) || hi == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f–%.3f", lo, hi)
}

func fmtRequests(s summary) string {
	if s.Requests == 0 {
		return "0"
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(s.RequestsOps)) {
		parts = append(parts, fmt.Sprintf("%s %s", strings.TrimSuffix(fmt.Sprintf("%.2f", s.RequestsOps[op]), ".00"), op))
	}
	return fmt.Sprintf("%s (%s)", strings.TrimSuffix(fmt.Sprintf("%.2f", s.Requests), ".00"), strings.Join(parts, ", "))
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Performance\n\n")
	p("The same workload through this library and through Powertools for AWS Lambda (TypeScript), "+
		"in one run on one machine, alternating between the two in rounds: a bare API Gateway handler made "+
		"idempotent with the key `powertools_json(body).order_id`, on a %d-byte API Gateway REST event. ", r.EventBytes)
	p("*Added latency* is the wrapped call's time minus the bare handler's on the same event, per invocation; " +
		"*CPU* is the client process's CPU time (user and system, every thread) per invocation, over the bare handler's; " +
		"*requests* are counted by a proxy in front of the DynamoDB-compatible server that sees both sides. " +
		"Ratios are Powertools over this library, within each round, then the median over rounds (p99: pooled).\n\n")
	p("![Added latency and CPU time per invocation, this library and Powertools](compare.svg)\n\n")
	p("| Workload | Added latency, median | | | p99 | | | CPU per invocation | | | DynamoDB requests per invocation | |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	p("| | **retrysafe** | Powertools | ratio | **retrysafe** | Powertools | ratio | **retrysafe** | Powertools | ratio | **retrysafe** | Powertools |\n")
	for _, w := range r.Rows {
		p("| %s | **%s** | %s | %s | **%s** | %s | %s | **%s** | %s | %s | **%s** | %s |\n", w.Name,
			fmtNs(w.Ours.AddedMedianNs), fmtNs(w.Theirs.AddedMedianNs), fmtRatio(w.Ratios.Median),
			fmtNs(w.Ours.AddedP99Ns), fmtNs(w.Theirs.AddedP99Ns), fmtRatio(w.Ratios.P99),
			fmtNs(w.Ours.CPUNs), fmtNs(w.Theirs.CPUNs), fmtRatio(w.Ratios.CPU),
			fmtRequests(w.Ours), fmtRequests(w.Theirs))
	}
	if r.hasFloor() {
		p("\nWhat the library adds over the bare SDK: the *SDK floor* makes the same DynamoDB requests as the library, " +
			"directly with the same SDK client against the same server, twice, in a run of their own with the library and the protocol's floor (below), the four taking turns of a few calls in a shuffled order " +
			"(a conditional PutItem and an UpdateItem " +
			"storing the same response for a first call; the conditional PutItem that fails with the existing item for a replay, " +
			"and a GetItem where the server does not return it). Ratios are this library over the floor (its two runs pooled): the median of the rounds' ratios, " +
			"then the lowest and highest round. *A/A* is the floor's second run over its first: the measurement's own error.\n\n")
		p("| Workload | CPU per invocation | | | | A/A | Added latency, median | | | Request bytes per invocation | | DynamoDB requests per invocation | |\n")
		p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
		p("| | **retrysafe** | SDK floor | ratio | rounds | floor over floor (rounds) | **retrysafe** | SDK floor | ratio | **retrysafe** | SDK floor | **retrysafe** | SDK floor |\n")
		for _, w := range r.Rows {
			if w.Floor == nil {
				continue
			}
			aa := "n/a"
			if w.FloorAA != nil {
				aa = fmt.Sprintf("%.3f× (%s)", float64(w.FloorAA.CPU), fmtSpread(*w.FloorAA))
			}
			lib := w.inFloorRun()
			p("| %s | **%s** | %s | %s | %s | %s | **%s** | %s | %s | **%.0f** | %.0f | **%s** | %s |\n", w.Name,
				fmtNs(lib.CPUNs), fmtNs(w.Floor.CPUNs), fmtNearOne(w.OverFloor.CPU), fmtSpread(*w.OverFloor), aa,
				fmtNs(lib.AddedMedianNs), fmtNs(w.Floor.AddedMedianNs), fmtNearOne(w.OverFloor.Median),
				lib.RequestBytes, w.Floor.RequestBytes, fmtRequests(lib), fmtRequests(*w.Floor))
		}
	}
	if r.hasProtocolFloor() {
		p("\nWhere the cost over the floor is: the *protocol's floor* makes the library's own requests, byte for byte but for the values that change from call to call (the owner token, the key's hash, the times), " +
			"directly with the SDK in the same run (the owner token and the in-progress expiry in the item, and the conditions of docs/protocol.md). " +
			"Its cost over the SDK floor is the request shape the guarantees need; the library's over it is the library's code. " +
			"These ratios inform; the targets are over the SDK floor.\n\n")
		p("| Workload | CPU per invocation | | | protocol's floor over the SDK floor | | retrysafe over the protocol's floor | | Request bytes per invocation |\n")
		p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		p("| | **retrysafe** | protocol's floor | SDK floor | ratio | rounds | ratio | rounds | protocol's floor |\n")
		for _, w := range r.Rows {
			if w.ProtocolFloor == nil {
				continue
			}
			lib := w.inFloorRun()
			p("| %s | **%s** | %s | %s | %s | %s | %s | %s | %.0f |\n", w.Name,
				fmtNs(lib.CPUNs), fmtNs(w.ProtocolFloor.CPUNs), fmtNs(w.Floor.CPUNs),
				fmtNearOne(w.ProtocolOverFloor.CPU), fmtSpread(*w.ProtocolOverFloor),
				fmtNearOne(w.OverProtocolFloor.CPU), fmtSpread(*w.OverProtocolFloor),
				w.ProtocolFloor.RequestBytes)
		}
	}
	if len(r.Capacity) > 0 {
		p("\nCapacity units per call, by the size of the response the handler returns (a JSON list of orders, as in the store's capacity test): " +
			"what the server reports with `ReturnConsumedCapacity`, and for a failed conditional write, which reports none though DynamoDB charges it, " +
			"a write unit per KB of the existing item (AWS's documented rule), from the item the failure returns. " +
			"A first call is the reservation and the completion; a replay is the same call again.\n\n")
		p("| Response | first call | | replay | |\n| ---: | ---: | ---: | ---: | ---: |\n| | **retrysafe** | Powertools | **retrysafe** | Powertools |\n")
		for _, c := range r.Capacity {
			p("| %s | **%g** | %g | **%g** | %g |\n", fmtBytes(c.Size), c.Ours.First, c.Theirs.First, c.Ours.Replay, c.Theirs.Replay)
		}
	}
	p("\nTargets:\n\n")
	for _, t := range r.Targets {
		mark := "met"
		if !t.Met {
			mark = "**not met**"
		}
		p("- %s: %s (%s)\n", t.What, t.Got, mark)
	}
	p("\nSet-up: %s; %s; %s; %s. ", r.Machine, r.Ours, r.Theirs, r.Dynalite)
	p("%d measured rounds after %d of warm-up; per round and side, %d invocations per loop with the in-memory store, %d with DynamoDB; "+
		"the bare handlers' median latency was %s (Go) and %s (Node.js). ",
		r.Rounds, r.Warmup, r.NMemory, r.NDynamoDB, fmtNs(r.Rows[0].Ours.BareMedianNs), fmtNs(r.Rows[0].Theirs.BareMedianNs))
	if r.NativeAllOld {
		p("DynamoDB Local returns the existing item of a failed conditional PutItem (`ReturnValuesOnConditionCheckFailure`) itself, as DynamoDB does: " +
			"the proxy only counts requests, and rewrites none. ")
	}
	if r.AllOld {
		p("dynalite ignores `ReturnValuesOnConditionCheckFailure`; the proxy adds the existing item to a failed conditional " +
			"PutItem, as DynamoDB does, with a read of its own that is not counted, for both sides alike (`-all-old=false` turns this off: " +
			"a replay then costs both libraries a GetItem more). ")
	}
	p("Generated %s by `make compare` (`go -C bench/compare run .`).\n", r.Date)
	return b.String()
}

// svg draws two panels of horizontal bars on a logarithmic scale: the
// median added latency and the CPU time per invocation, each workload with
// a bar per library and the ratio between them.
func (r *report) svg() string {
	const (
		width    = 960
		labelW   = 230
		plotW    = 560
		barH     = 14
		groupGap = 14
		top      = 74
		panelGap = 24
		ours     = "#1b6ac9"
		theirs   = "#e8833a"
	)
	type panel struct {
		title  string
		values func(row) (float64, float64, float64)
	}
	panels := []panel{
		{"Added latency per invocation, median", func(w row) (float64, float64, float64) {
			return float64(w.Ours.AddedMedianNs), float64(w.Theirs.AddedMedianNs), float64(w.Ratios.Median)
		}},
		{"CPU time per invocation", func(w row) (float64, float64, float64) {
			return float64(w.Ours.CPUNs), float64(w.Theirs.CPUNs), float64(w.Ratios.CPU)
		}},
	}
	// One logarithmic axis for both panels, whole decades.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pn := range panels {
		for _, w := range r.Rows {
			a, c, _ := pn.values(w)
			for _, v := range []float64{a, c} {
				if v > 0 && !math.IsNaN(v) {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	x := func(v float64) float64 {
		if v <= 0 || math.IsNaN(v) {
			return 0
		}
		return math.Max(2, (math.Log10(v)-dlo)/(dhi-dlo)*plotW)
	}
	groupH := 2*barH + groupGap
	panelH := 30 + len(r.Rows)*groupH + 24
	height := top + len(panels)*panelH + (len(panels)-1)*panelGap + 4

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="16" y="24" font-size="16" font-weight="bold">retrysafe (Go) and Powertools for AWS Lambda (TypeScript): idempotency overhead</text>` + "\n")
	p(`<text x="16" y="44" fill="#555">%s. Logarithmic scale. Generated by bench/compare.</text>`+"\n", html.EscapeString(r.Machine))
	p(`<rect x="16" y="54" width="12" height="12" fill="%s"/><text x="34" y="64">%s</text>`+"\n", ours, html.EscapeString(r.Ours))
	p(`<rect x="480" y="54" width="12" height="12" fill="%s"/><text x="498" y="64">%s</text>`+"\n", theirs, html.EscapeString(r.Theirs))

	y0 := top
	for _, pn := range panels {
		p(`<text x="16" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", y0+16, html.EscapeString(pn.title))
		p(`<text x="%d" y="%d" text-anchor="middle" fill="#555">Powertools ÷ retrysafe</text>`+"\n", labelW+plotW+85, y0+16)
		plotTop := y0 + 26
		plotBottom := plotTop + len(r.Rows)*groupH
		for d := dlo; d <= dhi; d++ {
			gx := float64(labelW) + float64(d-dlo)/(dhi-dlo)*plotW
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, plotTop, gx, plotBottom)
			p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, plotBottom+14, fmtTick(math.Pow(10, d)))
		}
		for i, w := range r.Rows {
			a, c, ratio := pn.values(w)
			gy := plotTop + i*groupH + groupGap/2
			p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, gy+barH+4, html.EscapeString(w.Name))
			for j, v := range []float64{a, c} {
				color := []string{ours, theirs}[j]
				by := gy + j*barH
				bw := x(v)
				p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, by, bw, barH-2, color)
				p(`<text x="%.1f" y="%d" fill="#333">%s</text>`+"\n", float64(labelW)+bw+4, by+barH-3, fmtNs(v))
			}
			p(`<text x="%d" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", labelW+plotW+85, gy+barH+4, fmtRatio(ratio))
		}
		y0 += panelH + panelGap
	}
	p("</svg>\n")
	return b.String()
}
