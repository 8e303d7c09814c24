package main

import (
	"encoding/json"
	"math"
	"slices"
)

// phase is one measured workload: a store and a path.
type phase struct {
	Store string `json:"store"`
	Path  string `json:"path"`
}

// Name is how the reports name the workload, against dynalite.
func (p phase) Name() string { return p.NameOn(serverDynalite) }

// NameOn is how the reports name the workload against server (one of the
// -server values).
func (p phase) NameOn(server string) string {
	label := map[string]string{serverDynalite: "dynalite", serverDynamoDBLocal: "DynamoDB Local"}[server]
	stores := map[string]string{"memory": "in-memory store", "dynamodb": "DynamoDB (" + label + ")", "cached": "DynamoDB + local cache"}
	paths := map[string]string{"first": "first call", "replay": "replay"}
	return paths[p.Path] + ", " + stores[p.Store]
}

// round is what one side measured in one phase of one round.
type round struct {
	AddedNs     []int64            // per invocation: wrapped minus bare, same event
	BareNs      []int64            // per invocation, the bare handler alone
	CPUAddedNs  float64            // per invocation: CPU of the wrapped loop minus the bare loop, over N
	WallAddedNs float64            // per invocation: wall-clock time of the same loops, likewise
	Requests    float64            // DynamoDB requests per invocation
	RequestsOps map[string]float64 // the same, by operation
	// RequestBytes is the size of the request bodies per invocation.
	RequestBytes float64
}

// summary is one side's result for one phase over every measured round.
type summary struct {
	N              int                `json:"invocations"`       // measured invocations, latency loops only
	AddedMedianNs  num                `json:"added_median_ns"`   // median of the pooled per-invocation added latencies
	AddedP99Ns     num                `json:"added_p99_ns"`      // 99th percentile of the same
	BareMedianNs   num                `json:"bare_median_ns"`    // median latency of the bare handler
	CPUNs          num                `json:"cpu_ns"`            // median over rounds of the added CPU time per invocation
	LoopNs         num                `json:"loop_ns"`           // median over rounds of the added wall-clock time per invocation in the CPU loops
	Requests       float64            `json:"requests"`          // DynamoDB requests per invocation, every round together
	RequestBytes   float64            `json:"request_bytes"`     // bytes of request bodies per invocation, likewise
	RequestsOps    map[string]float64 `json:"requests_by_op"`    // the same, by operation
	RoundMediansNs []float64          `json:"round_medians_ns"`  // median added latency of each round
	RoundCPUNs     []float64          `json:"round_cpu_ns"`      // added CPU per invocation of each round
	RoundRequests  []float64          `json:"round_requests"`    // requests per invocation of each round
	Calls          int                `json:"calls_per_request"` // wrapped calls the request counts cover, per round
}

func summarize(rounds []round, calls int) summary {
	var s summary
	var added, bare []int64
	var wall []float64
	ops := make(map[string]float64)
	for _, r := range rounds {
		added = append(added, r.AddedNs...)
		bare = append(bare, r.BareNs...)
		s.RoundMediansNs = append(s.RoundMediansNs, percentile(r.AddedNs, 0.5))
		s.RoundCPUNs = append(s.RoundCPUNs, r.CPUAddedNs)
		wall = append(wall, r.WallAddedNs)
		s.RoundRequests = append(s.RoundRequests, r.Requests)
		s.Requests += r.Requests / float64(len(rounds))
		s.RequestBytes += r.RequestBytes / float64(len(rounds))
		for op, v := range r.RequestsOps {
			ops[op] += v / float64(len(rounds))
		}
	}
	s.N = len(added)
	s.Calls = calls
	s.AddedMedianNs = num(percentile(added, 0.5))
	s.AddedP99Ns = num(percentile(added, 0.99))
	s.BareMedianNs = num(percentile(bare, 0.5))
	s.CPUNs = num(median(s.RoundCPUNs))
	s.LoopNs = num(median(wall))
	s.RequestsOps = ops
	return s
}

// ratios are Powertools' numbers over ours for one phase (or ours over the
// SDK floor's, or the floor's over itself). Median and CPU are the median
// over rounds of the ratio within each round, where both sides ran on the
// same machine within seconds of each other; p99 is the ratio of the
// pooled percentiles (one round has too few tail samples). CPUMin and
// CPUMax are the least and the greatest of the rounds' CPU ratios: the
// spread around the median.
type ratios struct {
	Median num `json:"added_median"`
	P99    num `json:"added_p99"`
	CPU    num `json:"cpu"`
	CPUMin num `json:"cpu_round_min"`
	CPUMax num `json:"cpu_round_max"`
}

func compare(ours, theirs summary) ratios {
	per := func(a, b []float64) []float64 {
		var rs []float64
		for i := range min(len(a), len(b)) {
			if a[i] > 0 {
				rs = append(rs, b[i]/a[i])
			}
		}
		return rs
	}
	cpu := per(ours.RoundCPUNs, theirs.RoundCPUNs)
	r := ratios{
		Median: num(median(per(ours.RoundMediansNs, theirs.RoundMediansNs))),
		P99:    num(div(float64(theirs.AddedP99Ns), float64(ours.AddedP99Ns))),
		CPU:    num(median(cpu)),
		CPUMin: num(math.NaN()),
		CPUMax: num(math.NaN()),
	}
	if len(cpu) > 0 {
		r.CPUMin, r.CPUMax = num(slices.Min(cpu)), num(slices.Max(cpu))
	}
	return r
}

// num is a float64 that is written to JSON as null when it is not a
// number (a ratio over zero, the median of nothing), which encoding/json
// cannot write otherwise.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = num(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(n))
}

func div(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// percentile returns the p-quantile of xs (nearest rank), NaN when empty.
func percentile(xs []int64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return float64(s[max(0, min(i, len(s)-1))])
}

// median returns the median of xs, NaN when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
