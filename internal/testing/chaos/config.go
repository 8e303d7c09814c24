package chaos

import (
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"
)

// Config sets the size of a run and the faults it injects. Zero fields take
// the defaults of Short.
type Config struct {
	// Seed determines every random choice the harness makes: the keys, each
	// invocation's environment and faults, the clock skews, the disruptions.
	// Goroutine scheduling and the stores' timing are not determined by it,
	// so a seed reproduces a run's plan, not its exact interleaving.
	Seed uint64

	// Clients is the number of concurrent clients.
	Clients int
	// Keys is the number of keys each client drives to a final answer. Zero
	// means: new keys until Duration has passed.
	Keys int
	// Duration bounds a run with Keys zero.
	Duration time.Duration

	// Envs is the number of execution environments, each with its own store
	// client, clock and fault injection.
	Envs int
	// CachedEnvs is the number of environments (of Envs) that put the local
	// cache (memory.NewCache) in front of their store.
	CachedEnvs int
	// SkewBound bounds each environment's clock offset from true time: the
	// offsets are drawn from [-SkewBound, SkewBound], so two environments
	// disagree by up to twice the bound.
	SkewBound time.Duration
	// Timeout is each invocation's deadline, the Lambda function timeout.
	Timeout time.Duration
	// Lease is the lease (idempotency.WithLease) of the deployments in
	// leased environments: their reservations hold the key for a lease at
	// a time, renewed while the handler works, instead of until the
	// deadline. It should be shorter than Timeout.
	Lease time.Duration
	// LeasedEnvs is the number of environments that use Lease: every other
	// one from the second (1, 3, ...). Their handlers work up to a lease
	// (not Work), so that most invocations there renew their reservation.
	LeasedEnvs int
	// Expiry is the library's WithExpiry. Runs must be shorter, since the
	// guarantee holds within a key's expiry window.
	Expiry time.Duration
	// Work bounds the handler's normal work before its side effect.
	Work time.Duration
	// Overrun bounds how far past its deadline an overrunning handler runs.
	Overrun time.Duration
	// MaxAttempts bounds the attempts a client makes for one answer; a key
	// that needs more is reported as a liveness violation.
	MaxAttempts int
	// Replays bounds the extra calls a client makes with a key after its
	// final answer, each of which must give the same answer.
	Replays int

	// DisruptEvery is the mean interval between store-wide disruptions
	// (restarts, stalls, throttling bursts); zero means none.
	DisruptEvery time.Duration

	// Rates are the probabilities of the injected faults.
	Rates Rates
}

// Rates are the probabilities of the faults the harness injects.
type Rates struct {
	// StoreFault is the probability that a store call fails before reaching
	// the store, loses its reply, is retried after a lost reply, or (Put)
	// conflicts without the existing record: a quarter each.
	StoreFault float64
	// HTTPFault is the probability that an HTTP attempt of a store over HTTP
	// (DynamoDB) is refused, loses its reply, or is throttled: a third each.
	// The SDK retries each attempt.
	HTTPFault float64
	// LateWrite is the probability that a write (reservation, renewal,
	// completion, release, commit) is held back and applied late: its
	// sender gets a timeout at once, and the write reaches the store after
	// a delay, often after the invocation ended. It is drawn for every
	// store call, and for a store over HTTP for every attempt of a write,
	// which the SDK retries (see late.go).
	LateWrite float64

	// Per invocation, before the side effect: a transient handler error, a
	// panic, a kill, or a stall past the deadline followed by a late side
	// effect (a handler that ignores its context).
	HandlerError float64
	Panic        float64
	KillBefore   float64
	LateEffect   float64
	// Per invocation, after the side effect: a kill before the completion
	// write, an overrun past the deadline (the client gives up; the
	// invocation finishes late), or a failure marked Permanent.
	KillAfter float64
	Overrun   float64
	FailAfter float64

	// Duplicate is the probability that an attempt is delivered twice at
	// once, to two environments (at-least-once delivery, a double click).
	Duplicate float64

	// Per key: a request the handler declines (a permanent error, recorded
	// and replayed), and a request whose response is too large to store.
	Decline float64
	Large   float64
}

// DefaultRates are the fault rates of Short and Long.
func DefaultRates() Rates {
	return Rates{
		StoreFault:   0.04,
		HTTPFault:    0.04,
		LateWrite:    0.02,
		HandlerError: 0.05,
		Panic:        0.03,
		KillBefore:   0.02,
		LateEffect:   0.01,
		KillAfter:    0.04,
		Overrun:      0.04,
		FailAfter:    0.02,
		Duplicate:    0.08,
		Decline:      0.05,
		Large:        0.05,
	}
}

// Short is the configuration of the short mode, run by the regular tests.
func Short() Config {
	return Config{
		Clients:      6,
		Keys:         10,
		Envs:         4,
		CachedEnvs:   1,
		SkewBound:    20 * time.Millisecond,
		Timeout:      250 * time.Millisecond,
		Lease:        90 * time.Millisecond,
		LeasedEnvs:   2,
		Expiry:       time.Hour,
		Work:         3 * time.Millisecond,
		Overrun:      120 * time.Millisecond,
		MaxAttempts:  200,
		Replays:      2,
		DisruptEvery: 1500 * time.Millisecond,
		Rates:        DefaultRates(),
	}
}

// Long is the configuration of the long mode: more clients, new keys until
// duration has passed.
func Long(duration time.Duration) Config {
	c := Short()
	c.Clients = 16
	c.Keys = 0
	c.Duration = duration
	c.Envs = 8
	c.CachedEnvs = 2
	c.LeasedEnvs = 4
	c.DisruptEvery = 5 * time.Second
	return c
}

func (c Config) withDefaults() Config {
	d := Short()
	if c.Clients <= 0 {
		c.Clients = d.Clients
	}
	if c.Keys <= 0 && c.Duration <= 0 {
		c.Keys = d.Keys
	}
	if c.Envs <= 0 {
		c.Envs = d.Envs
	}
	if c.CachedEnvs > c.Envs {
		c.CachedEnvs = c.Envs
	}
	if c.Timeout <= 0 {
		c.Timeout = d.Timeout
	}
	if c.Expiry <= 0 {
		c.Expiry = d.Expiry
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.Rates == (Rates{}) {
		c.Rates = d.Rates
	}
	return c
}

// Kinds of injected fault, as the report counts them.
const (
	faultNone = ""

	faultStoreFailBefore   = "store_fail_before"
	faultStoreLostReply    = "store_lost_reply"
	faultStoreRetriedReply = "store_retried_after_lost_reply"
	faultStoreNoExisting   = "store_conflict_without_record"
	faultStoreLate         = "store_applied_late"
	faultHTTPLate          = "http_forwarded_late"
	faultHTTPRefused       = "http_refused"
	faultHTTPLostReply     = "http_lost_reply"
	faultHTTPThrottled     = "http_throttled"

	faultHandlerError = "handler_error"
	faultPanic        = "handler_panic"
	faultKillBefore   = "kill_before_side_effect"
	faultLateEffect   = "handler_late_side_effect"
	faultKillAfter    = "kill_after_side_effect"
	faultOverrun      = "handler_overrun"
	faultFailAfter    = "handler_permanent_after_side_effect"
	faultDuplicate    = "duplicate_delivery"
	faultDecline      = "declined_key"
	faultLarge        = "large_response_key"
	faultSkewedEnv    = "skewed_env"

	// Disruptions: see Backend.
	faultRestart       = "store_restart"
	faultStall         = "store_stall"
	faultThrottleBurst = "throttle_burst"
)

// plan is what one invocation's handler does.
type plan struct {
	env     int
	work    time.Duration
	before  string // faultNone, faultHandlerError, faultPanic, faultKillBefore, faultLateEffect
	after   string // faultNone, faultKillAfter, faultOverrun, faultFailAfter
	overrun time.Duration
}

// pick returns the first kind whose cumulative probability exceeds r, or
// faultNone.
func pick(r float64, kinds []string, probs []float64) string {
	for i, p := range probs {
		if r < p {
			return kinds[i]
		}
		r -= p
	}
	return faultNone
}

// leased reports whether environment i uses the lease.
func (c *Config) leased(i int) bool {
	return c.Lease > 0 && i%2 == 1 && i/2 < c.LeasedEnvs
}

// newPlan draws an invocation's plan.
func (c *Config) newPlan(rng *rand.Rand) plan {
	r := c.Rates
	p := plan{env: rng.IntN(c.Envs)}
	work := c.Work
	if c.leased(p.env) {
		work = c.Lease
	}
	if work > 0 {
		p.work = time.Duration(rng.Int64N(int64(work)))
	}
	p.before = pick(rng.Float64(),
		[]string{faultHandlerError, faultPanic, faultKillBefore, faultLateEffect},
		[]float64{r.HandlerError, r.Panic, r.KillBefore, r.LateEffect})
	p.after = pick(rng.Float64(),
		[]string{faultKillAfter, faultOverrun, faultFailAfter},
		[]float64{r.KillAfter, r.Overrun, r.FailAfter})
	if c.Overrun > 0 {
		p.overrun = time.Millisecond + time.Duration(rng.Int64N(int64(c.Overrun)))
	}
	return p
}

// newRand returns a generator seeded by seed and the names of what it is
// for, so that each client, key and invocation draws the same numbers
// whatever the others do.
func newRand(seed uint64, parts ...any) *rand.Rand {
	f := fnv.New64a()
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			f.Write([]byte(p))
		case int:
			f.Write([]byte(strconv.Itoa(p)))
		}
		f.Write([]byte{0})
	}
	return rand.New(rand.NewPCG(seed, f.Sum64()))
}
