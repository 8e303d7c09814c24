package lossyh2

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/testing/lossyproxy"
)

// Random loses about the share it is asked to, on every seed, in the
// first calls of every stream too.
func TestRandomLosesItsShare(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		lost := 0
		for stream := uint64(0); stream < 6; stream++ {
			decide := Random(seed*0x9e3779b97f4a7c15, stream, 0.05, 0.05)
			for n := 1; n <= 21; n++ {
				if decide(n) != lossyproxy.Pass {
					lost++
				}
			}
		}
		// 126 calls at 10%: 12.6 expected; fewer than 2 has a
		// probability below 1e-4 for one seed.
		if lost < 2 || lost > 30 {
			t.Errorf("seed %d: %d of 126 calls lost", seed, lost)
		}
	}
}
