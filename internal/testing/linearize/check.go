package linearize

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result counts what Check checked.
type Result struct {
	Calls   int           // calls checked
	Keys    int           // keys, each checked apart
	Unknown int           // calls whose outcome the caller did not learn
	Took    time.Duration // time spent checking
}

// A Violation is a key whose history no sequential execution of the
// protocol's table explains.
type Violation struct {
	Key string
	// History is the shortest prefix in time of the key's history that
	// is not linearizable, one call a line.
	History string
	// Longest is the longest order of those calls that the table
	// explains.
	Longest string
	// HTML is the file of Porcupine's visualization of History.
	HTML string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("linearize: the calls on key %s are not linearizable:\n%s\nthe longest order the table explains: %s\nvisualization: %s",
		v.Key, v.History, v.Longest, v.HTML)
}

// Check checks each key's history in h against the model, with at most
// timeout for each key. It returns a *Violation for a key that is not
// linearizable, with Porcupine's visualization written to a file in
// dir. Keys that the checker cannot decide within timeout are an error
// too: a key's history must stay small enough to check.
func Check(h *History, timeout time.Duration, dir string) (Result, error) {
	begin := time.Now()
	keys := map[string][]porcupine.Operation{}
	res := Result{}
	for _, op := range h.operations() {
		in := op.Input.(input)
		keys[in.Key] = append(keys[in.Key], attempts(op)...)
		res.Calls++
		if op.Output.(output).Outcome == unknown {
			res.Unknown++
		}
	}
	res.Keys = len(keys)

	var (
		mu        sync.Mutex
		illegal   []string
		undecided []string
		work      = make(chan string)
		wg        sync.WaitGroup
	)
	for range 2 { // the checks of two keys at a time
		wg.Go(func() {
			for key := range work {
				r := porcupine.CheckOperationsTimeout(model, keys[key], timeout)
				mu.Lock()
				switch r {
				case porcupine.Illegal:
					illegal = append(illegal, key)
				case porcupine.Unknown:
					undecided = append(undecided, key)
				}
				mu.Unlock()
			}
		})
	}
	for key := range keys {
		work <- key
	}
	close(work)
	wg.Wait()
	res.Took = time.Since(begin)
	if len(illegal) > 0 {
		slices.Sort(illegal)
		return res, explain(illegal[0], keys[illegal[0]], timeout, dir)
	}
	if len(undecided) > 0 {
		return res, fmt.Errorf("linearize: %d keys not decided within %v each (%s, ...): their histories are too large to check", len(undecided), timeout, undecided[0])
	}
	return res, nil
}

// attempts returns the write op with an earlier attempt of it. A client
// may have sent it, lost the reply, and sent it again (an SDK's retry).
// The earlier attempt may take effect at any point of the call, and its
// reply is unknown. Where no attempt was lost, the check can place it
// right after the call, where it changes nothing.
func attempts(op porcupine.Operation) []porcupine.Operation {
	in := op.Input.(input)
	if in.Write == get || op.Output.(output).Outcome == unknown {
		return []porcupine.Operation{op}
	}
	earlier := op
	in.Attempt = true
	earlier.Input, earlier.Output = in, output{Outcome: unknown}
	return []porcupine.Operation{op, earlier}
}

// explain returns the Violation of key, whose history ops is not
// linearizable: the shortest prefix in time that is not.
func explain(key string, ops []porcupine.Operation, timeout time.Duration, dir string) error {
	ends := make([]int64, 0, len(ops))
	for _, op := range ops {
		if op.Return != never {
			ends = append(ends, op.Return)
		}
	}
	slices.Sort(ends)
	// Cut at the first return that leaves a prefix that is not
	// linearizable. A prefix of a linearizable history is linearizable,
	// so the cuts that fail are those after some point.
	i, _ := slices.BinarySearchFunc(ends, true, func(end int64, _ bool) int {
		if porcupine.CheckOperationsTimeout(model, prefix(ops, end), timeout) == porcupine.Illegal {
			return 1
		}
		return -1
	})
	if i < len(ends) {
		ops = prefix(ops, ends[i])
	}
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)

	// The history shows the calls, not their earlier attempts, which
	// are in the visualization.
	v := &Violation{Key: key}
	index := map[int64]int{}
	var b strings.Builder
	first := ops[0].Call
	for _, op := range ops {
		in := op.Input.(input)
		if in.Attempt {
			continue
		}
		index[op.Call] = len(index) + 1
		end := "never"
		if op.Return != never {
			end = fmt.Sprintf("%8.3fms", float64(op.Return-first)/1e6)
		}
		fmt.Fprintf(&b, "  %2d  %8.3fms .. %s  client %d  %s\n", len(index), float64(op.Call-first)/1e6, end, op.ClientId, describe(in, op.Output.(output)))
	}
	v.History = strings.TrimSuffix(b.String(), "\n")
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	var nums []string
	for _, op := range longest {
		if !op.Input.(input).Attempt {
			nums = append(nums, fmt.Sprint(index[op.Call]))
		}
	}
	v.Longest = strings.Join(nums, ", ")

	v.HTML = filepath.Join(dir, "linearize-"+safeName(key)+".html")
	if err := porcupine.VisualizePath(model, info, v.HTML); err != nil {
		return errors.Join(v, err)
	}
	return v
}

// prefix returns ops as seen at time end: the calls made by then, those
// that had not returned with an unknown outcome.
func prefix(ops []porcupine.Operation, end int64) []porcupine.Operation {
	var p []porcupine.Operation
	for _, op := range ops {
		switch {
		case op.Call > end:
			continue
		case op.Return > end:
			in := op.Input.(input)
			in.Until = time.Unix(1<<40, 0)
			op.Input, op.Output, op.Return = in, output{Outcome: unknown}, never
		}
		p = append(p, op)
	}
	return p
}

// safeName makes a key a file name.
func safeName(key string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == '#' || r == ' ' {
			return '_'
		}
		return r
	}, key)
}
