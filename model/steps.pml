/*
 * A step's record (docs/protocol.md, write a step), for SPIN.
 *
 * One step of one key. Attempts of the call run the step: each reads the
 * step's record and takes its result when it is live; otherwise it runs
 * the step's side effect and sends its step write, and goes on with the
 * result the reply gives (its own when the write applied, the stored one
 * on a conflict). Attempts overlap in any way, as after takeovers of
 * lapsed reservations (idempotency.pml checks the call's own record).
 * Any attempt may crash or give up waiting. Every write goes through a
 * network that may apply it at any later time (up to MAXDELAY), any
 * number of times, or never. The store takes each write's outcome from
 * the generated table (table.pml).
 *
 * The properties (assertions):
 *   S1  first writer wins: a live step's record is never overwritten
 *   S2  within a window, every attempt that goes on past the step with
 *       a reply or a read goes on with one result, the stored one
 *
 * Settings (spin -D...):
 *   NPROC        attempts, each with a token of its own, 1..NPROC
 *   TMAX         the last tick of the clock
 *   EXPIRY       a step's record expires EXPIRY after it is written
 *   MAXDELAY     the longest a write stays in the network (EXPIRY)
 *   BROKEN_STEP  a step write that overwrites a live record: must fail
 *   NOHIDDEN     no hidden variables, for a breadth-first search
 */

#ifndef NOHIDDEN
#define OUTCOME_HIDDEN
#define SCRATCH hidden byte
#else
#define SCRATCH byte
#endif
#include "table.pml"

#ifdef COVER
c_decl {
	unsigned char cover[NWRITES*NSTATES];
	static void printcover(void) {
		int i;
		printf("cover:");
		for (i = 0; i < NWRITES*NSTATES; i++) printf(" %d", cover[i]);
		printf("\n");
	}
}
#define COVERCELL c_code { cover[now.cell] = 1; }
#define COVERINIT c_code { atexit(printcover); }
#else
#define COVERCELL skip
#define COVERINIT skip
#endif

#ifndef NPROC
#define NPROC 3
#endif
#ifndef TMAX
#define TMAX 5
#endif
#ifndef EXPIRY
#define EXPIRY 2
#endif
#ifndef MAXDELAY
#define MAXDELAY EXPIRY
#endif
#if NPROC > 3 || NPROC < 2
#error "the network has writes for 2 or 3 attempts"
#endif

/* The step's record: absent or completed, with its writer's token. */
#define ABSENT 0
#define COMPLETED 2
byte sstat;
byte stok;
byte sexp;

byte now;

/* The network: k's step write, sent at tsent[k]. */
bit msent[NPROC+1];
byte tsent[NPROC+1];

/*
 * Ghosts.
 *   waiting[k]  k waits for the reply to its step write
 *   used[k]     the result k goes on with in this window (0: none yet)
 */
bit waiting[NPROC+1];
byte used[NPROC+1];

byte cell;
SCRATCH st;
SCRATCH out;
SCRATCH gj;

#define live(t) (sstat == COMPLETED && !(sexp < (t)))

/* The state of the step's record seen from k at time tm. */
inline classify(k, tm) {
	if
	:: sstat == ABSENT -> st = S_ABSENT
	:: sstat == COMPLETED && stok == k -> st = ((sexp < tm) -> S_OWN_EXPIRED : S_OWN_COMPLETED)
	:: sstat == COMPLETED && stok != k -> st = ((sexp < tm) -> S_OTHER_EXPIRED : S_OTHER_COMPLETED)
	fi
}

/* k goes on with result r: S2 against every other attempt. */
inline goon(k, r) {
	used[k] = r;
	gj = 1;
	do
	:: gj <= NPROC ->
		assert(used[gj] == 0 || used[gj] == r);	/* S2 */
		gj++
	:: else -> break
	od;
	gj = 0
}

/* The store applies k's step write, now. */
inline apply(k) {
	classify(k, now);
	cell = W_WRITE_A_STEP*NSTATES + st;
	COVERCELL;
	out = outcome[cell];
	if
	:: out == O_APPLIES ->
		assert(!live(now));	/* S1 */
		sstat = COMPLETED; stok = k; sexp = now + EXPIRY;
		printf("t=%d  store: applies %d's step write\n", now, k)
	:: else ->
		printf("t=%d  store: %d's step write conflicts\n", now, k)
	fi;
	if
	:: waiting[k] ->
		waiting[k] = 0;
		goon(k, stok)
	:: else -> skip
	fi;
	cell = 0; st = 0; out = 0
}

/* The clock. A window ends when the step's record expires: every use of
 * the last window's result is forgotten. */
active proctype clock() {
	do
	:: d_step { now < TMAX ->
		now++;
		if
		:: sstat == COMPLETED && sexp < now ->
			gj = 1;
			do
			:: gj <= NPROC -> used[gj] = 0; gj++
			:: else -> break
			od;
			gj = 0
		:: else -> skip
		fi }
	:: else -> break
	od
}

/* The network: any sent write, until MAXDELAY after it was sent. */
active proctype store() {
	do
	:: d_step { msent[1] && now <= tsent[1] + MAXDELAY -> apply(1) }
	:: d_step { msent[2] && now <= tsent[2] + MAXDELAY -> apply(2) }
#if NPROC > 2
	:: d_step { msent[3] && now <= tsent[3] + MAXDELAY -> apply(3) }
#endif
	:: timeout -> break
	od
}

proctype attempt(byte k) {
	if
	:: d_step { live(now) ->
		printf("t=%d  attempt %d: replays the step of %d\n", now, k, stok);
		goon(k, stok) }
	:: d_step { !live(now) ->
		printf("t=%d  attempt %d: runs the step; sends its write\n", now, k);
		msent[k] = 1; tsent[k] = now; waiting[k] = 1 }
		if
		:: skip	/* waits for the reply (store: apply) */
		:: d_step { waiting[k] -> waiting[k] = 0;
			printf("t=%d  attempt %d: crashes, or gives up waiting\n", now, k) }
		fi
	fi
}

init {
	atomic {
		COVERINIT;
		fill_table();
#ifdef BROKEN_STEP
		/* A late step write that overwrites another attempt's
		 * result. */
		outcome[W_WRITE_A_STEP*NSTATES + S_OTHER_COMPLETED] = O_APPLIES;
#endif
		gj = 1;
		do
		:: gj <= NPROC -> run attempt(gj); gj++
		:: else -> break
		od;
		gj = 0
	}
}
