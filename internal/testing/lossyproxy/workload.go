package lossyproxy

import (
	"math/rand/v2"
	"sync"
)

// Random returns a decide function for New and Start that loses a request
// before the server with probability lostRequests, and a reply after it
// with probability lostReplies. The fate of request n depends on seed,
// stream (one for each proxy of a test) and n alone, so that a run can be
// replayed from its seed, and it is safe for concurrent use.
func Random(seed, stream uint64, lostRequests, lostReplies float64) func(n int) Fault {
	return func(n int) Fault {
		p := rand.New(rand.NewPCG(seed, stream<<32|uint64(n))).Float64()
		switch {
		case p < lostRequests:
			return LoseRequest
		case p < lostRequests+lostReplies:
			return LoseReply
		}
		return Pass
	}
}

// Drive runs a workload of clients that each send every one of keys keys
// once: each client in an order of its own, drawn from seed, with workers
// requests in flight, each to one of proxies proxies that the client draws
// too. send sends the request of key from client to proxy, and is called
// concurrently. Drive returns when every request has been sent.
func Drive(seed uint64, clients, keys, workers, proxies int, send func(client, key, proxy int)) {
	var wg sync.WaitGroup
	for c := range clients {
		type job struct{ key, proxy int }
		jobs := make(chan job)
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		wg.Go(func() {
			defer close(jobs)
			for _, k := range rng.Perm(keys) {
				jobs <- job{k, rng.IntN(proxies)}
			}
		})
		for range workers {
			wg.Go(func() {
				for j := range jobs {
					send(c, j.key, j.proxy)
				}
			})
		}
	}
	wg.Wait()
}
