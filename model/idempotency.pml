/*
 * The idempotency record's protocol (docs/protocol.md), for SPIN.
 *
 * One key. Attempts reserve it, run a handler whose side effect is
 * recorded, renew their lease while it runs, and complete, commit or
 * release the key; any of them may crash. Every write goes through a
 * network that may apply it at any later time (up to MAXDELAY), in any
 * order, any number of times, or never. The store judges each write by the
 * state of the record as its writer sees it (absent, own in progress, ...,
 * other expired) and takes the outcome from the generated table
 * (table.pml): the model checks the table that the stores implement.
 *
 * The properties (assertions), all checked unless said otherwise:
 *   P1  at most once: a side effect repeats in a window only in the
 *       exceptions docs/guarantees.md lists (sideeffect, below)
 *   P2  with transactions, the staged write applies at most once in a
 *       window, with no exception
 *   P3  a completed record changes only by its expiry
 *   P4  bounded blocking: an in-progress record holds its key at most a
 *       lease from its owner's last reservation or renewal, and never past
 *       the owner's deadline; a held one (HOLD), at most until its expiry
 *   P5  a reservation is never taken from its holder while it is live
 *   P6  (GRANTED only) a holder keeps the key until the end of the lease
 *       that the replies to its reservation and renewals told it of
 *
 * Settings (spin -D...):
 *   NPROC, NATT  invocations, and the attempts of each, one after another
 *                (a new token each)
 *   TMAX         the last tick of the clock
 *   LEASE        a reservation or renewal at t holds the key until t+LEASE
 *   DEADLINE     an attempt's deadline, after its start: no lease past it
 *   EXPIRY       a record's expiry, after its reservation or completion
 *   MAXDELAY     the longest a write stays in the network (EXPIRY)
 *   TX           transactions: the side effect is a write staged with the
 *                commit, and applies exactly when the commit applies
 *   ONLY_REPEAT  check P1 and P2 only: a broken table then shows the
 *                repeated side effect it leads to, not its first wrong write
 *   HOLD         held reservations (idempotency.WithHoldUntilReleased):
 *                a reservation past its in-progress expiry still holds the
 *                key (own held, other held) until its expiry; P1 then
 *                allows no exception but a side effect run after its own
 *                record's expiry, or before an operator's release
 *   OPREL        (with HOLD) the operator: may release a held record past
 *                its in-progress expiry at any time
 *   GRANTED      check P6
 *   BROKEN_RENEW, BROKEN_COMPLETE, BROKEN_RELEASE, BROKEN_HELD
 *                table entries known to be wrong: each must fail
 *   BROKEN_RENEW_BACK
 *                a renewal that overwrites the in-progress expiry, even
 *                with an earlier one (the library before renewals took the
 *                later of the two): must fail P6
 *   SHOW_CRASH, SHOW_LOST, SHOW_OVERRUN
 *                an assertion that fails when the side effect repeats in
 *                one of the documented exceptions: each must fail, which
 *                shows that the exception is reachable
 *   SHOW_HELD_EXPIRY, SHOW_HELD_RELEASE
 *                (with HOLD) an assertion that fails when the side effect
 *                repeats after a record's expiry, or after an operator's
 *                release: each must fail
 *   NOHIDDEN     no hidden variables, for a breadth-first search
 */

/*
 * What does not change between the search's steps stays out of the state:
 * the table, once filled (before any other step), and the scratch
 * variables of the d_steps, always 0 between them. A breadth-first search
 * (pan compiled with -DBFS) allows no hidden variables: NOHIDDEN then.
 */
#ifndef NOHIDDEN
#define OUTCOME_HIDDEN
#define SCRATCH hidden byte
#else
#define SCRATCH byte
#endif
#include "table.pml"

/*
 * COVER: which cells of the table the search reached, kept outside the
 * state, so that it gathers over the whole search, and printed when the
 * search ends (model/check.sh reports the cells that no run reached). Only
 * with COVER: C code in a model costs SPIN some of its partial-order
 * reduction.
 */
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
#ifndef NATT
#define NATT 1
#endif
#define NTOK (NPROC*NATT)
#ifndef TMAX
#define TMAX 5
#endif
#ifndef LEASE
#define LEASE 2
#endif
#ifndef DEADLINE
#define DEADLINE 3
#endif
#ifndef EXPIRY
#define EXPIRY 3
#endif
#ifndef MAXDELAY
#define MAXDELAY EXPIRY
#endif
/*
 * The settings as constants, so that the inlines below need no #ifdef:
 * SPIN loses count of the lines of an inline that cpp shortened, and
 * model/check.sh finds a failed assertion by its line.
 */
#ifdef ONLY_REPEAT
#define ALL 0
#else
#define ALL 1
#endif
#ifdef SHOW_CRASH
#define SHOWCRASH 1
#else
#define SHOWCRASH 0
#endif
#ifdef SHOW_LOST
#define SHOWLOST 1
#else
#define SHOWLOST 0
#endif
#ifdef SHOW_OVERRUN
#define SHOWOVERRUN 1
#else
#define SHOWOVERRUN 0
#endif
#ifdef GRANTED
#define CHECKGRANTED 1
#else
#define CHECKGRANTED 0
#endif
#ifdef BROKEN_RENEW_BACK
#define RENEWBACK 1
#else
#define RENEWBACK 0
#endif
#ifdef HOLD
#define HOLDING 1
#else
#define HOLDING 0
#endif
#ifdef SHOW_HELD_EXPIRY
#define SHOWHELDEXPIRY 1
#else
#define SHOWHELDEXPIRY 0
#endif
#ifdef SHOW_HELD_RELEASE
#define SHOWHELDRELEASE 1
#else
#define SHOWHELDRELEASE 0
#endif
#if defined(OPREL) && !defined(HOLD)
#error "OPREL releases held records: it needs HOLD"
#endif

#if DEADLINE > 7
#error "renewals are a byte of lease ends: DEADLINE is at most 7"
#endif
#if NTOK > 6
#error "the store has writes for 6 attempts: NPROC*NATT is at most 6"
#endif

/*
 * The record. A token is an attempt's number, 1..NTOK; 0 is none. With
 * HOLD every reservation is held (persistence.Record.Held): the setting is
 * the library's, the same for every call with the key.
 */
#define ABSENT 0
#define INPROGRESS 1
#define COMPLETED 2
byte rstat;
byte rtok;
byte rinp;	/* in-progress expiry */
byte rexp;	/* expiry */

byte now;	/* the clock: one for every writer (no skew) */

/*
 * The network. Once sent, a write stays for MAXDELAY ticks: the store may
 * apply it at any time until then, again and again, or never. Dropping a
 * write is applying it never, so it needs no step of its own. (MAXDELAY
 * is the expiry by default: a write applied later than the expiry after it
 * was sent is outside what the protocol promises; see model/README.md.)
 *   mres[k]   k's reservation, sent at t0[k]
 *   mren[k]   k's renewals: bit d set for one whose lease ends at t0[k]+d
 *             (two renewals that end a lease at the same time are the
 *             same write, whenever they were sent)
 *   mfin[k]   k's last write, 1 + its W_* (complete, record an error,
 *             commit or release), sent at tfin[k]
 */
bit mres[NTOK+1];
byte mren[NTOK+1];
byte mfin[NTOK+1];
byte tfin[NTOK+1];

/* The attempts' own state, that the store reads to make their writes. */
byte t0[NTOK+1];	/* when the attempt began, and sent its reservation */
byte lend[NTOK+1];	/* the end of the last lease it asked for */
bit renewed[NTOK+1];	/* a renewal of it applied */

/*
 * Ghosts: what the properties are about, written where it happens.
 *   ran[k]     k ran its side effect in this window
 *   held[k]    ... and held the key when it did
 *   gtaken[k]  k's reservation was taken from it while live: another
 *              call's write changed k's in-progress record before its
 *              in-progress expiry
 *   cwin       a completion applied in this window
 *   staged     the staged write (TX) applied in this window
 *   fate[k]    where attempt k is: the exceptions are told apart by it
 *   granted[k] the latest end of a lease that k's reservation, or a
 *              renewal of k that applied in time, set: what their replies
 *              told k (GRANTED only)
 *   lost[k]    (HOLD) k's held reservation ended without k: it expired, or
 *              the operator released it
 *   acked[k]   (HOLD) an operator's release came after k's side effect in
 *              this window: the operator decided on it
 * A window ends when a completed record expires, and with HOLD when an
 * in-progress one does: a later call may run the handler again
 * (docs/guarantees.md: "within a key's expiry window").
 */
bit ran[NTOK+1];
bit held[NTOK+1];
bit gtaken[NTOK+1];
byte granted[NTOK+1];
bit lost[NTOK+1];
bit acked[NTOK+1];
bit cwin;
bit staged;
#define F_NONE 0
#define F_WAIT 1	/* sent its reservation, waits for the reply */
#define F_RUN 2		/* held the key (it may have lapsed since); its handler runs */
#define F_CRASH 3	/* died after its side effect */
#define F_SENT 4	/* sent its completion after its side effect */
#define F_OUT 5		/* ended otherwise, or its side effect no longer counts */
byte fate[NTOK+1];

/* Scratch for d_steps (cell is read by C code, which needs it in the state). */
byte cell;
SCRATCH gj;
SCRATCH st;
SCRATCH hw;
SCRATCH out;

#define min(a, b) ((a) < (b) -> (a) : (b))
#define max(a, b) ((a) > (b) -> (a) : (b))

/* The end of a lease taken at t by k: never past k's deadline. */
#define leaseend(k, t) min((t) + LEASE, t0[k] + DEADLINE)

/*
 * An in-progress record is live: before its expiry, and before its
 * in-progress expiry unless it is held.
 */
#define inplive(t) (rstat == INPROGRESS && !(rexp < (t)) && (HOLDING || !(rinp < (t))))

/* k's record, in progress and live: k holds the key. */
#define holds(k) (rtok == (k) && inplive(now))

/* For traces: the record, as the store holds it. */
inline print_record() {
	if
	:: rstat == ABSENT -> printf("absent")
	:: rstat == INPROGRESS -> printf("in progress, %d's, in-progress expiry %d, expiry %d", rtok, rinp, rexp)
	:: rstat == COMPLETED -> printf("completed, %d's, expiry %d", rtok, rexp)
	fi
}

/* The state of the record seen from k at time tm (protocol.State). */
inline classify(k, tm) {
	if
	:: rstat == ABSENT -> st = S_ABSENT
	/* A held reservation past its in-progress expiry is held until its
	 * expiry; past that, it is lapsed like any other. */
	:: rstat == INPROGRESS && rtok == k && !(rinp < tm) && !(rexp < tm) -> st = S_OWN_IN_PROGRESS
	:: rstat == INPROGRESS && rtok == k && rinp < tm && !(rexp < tm) && HOLDING -> st = S_OWN_HELD
	:: rstat == INPROGRESS && rtok == k && (rexp < tm || (rinp < tm && !HOLDING)) -> st = S_OWN_LAPSED
	:: rstat == INPROGRESS && rtok != k && !(rinp < tm) && !(rexp < tm) -> st = S_OTHER_IN_PROGRESS
	:: rstat == INPROGRESS && rtok != k && rinp < tm && !(rexp < tm) && HOLDING -> st = S_OTHER_HELD
	:: rstat == INPROGRESS && rtok != k && (rexp < tm || (rinp < tm && !HOLDING)) -> st = S_OTHER_LAPSED
	:: rstat == COMPLETED && rtok == k ->
		st = ((rexp < tm) -> S_OWN_EXPIRED : S_OWN_COMPLETED)
	:: rstat == COMPLETED && rtok != k ->
		st = ((rexp < tm) -> S_OTHER_EXPIRED : S_OTHER_COMPLETED)
	fi
}

/*
 * A window ends when the completed record expires, or with HOLD a held one
 * (which frees the key as the operator's release does): from then on, the
 * key is as good as new.
 */
inline endwindow() {
	if
	:: rstat != ABSENT && rexp < now && (rstat == COMPLETED || HOLDING) ->
		if
		:: rstat == INPROGRESS -> lost[rtok] = 1
		:: else -> skip
		fi;
		cwin = 0;
		staged = 0;
		gj = 1;
		do
		:: gj <= NTOK ->
			ran[gj] = 0;
			held[gj] = 0;
			acked[gj] = 0;
			/* How an attempt ended matters only while its side
			 * effect counts. */
			if
			:: fate[gj] == F_CRASH || fate[gj] == F_SENT -> fate[gj] = F_OUT
			:: else -> skip
			fi;
			gj++
		:: else -> break
		od;
		gj = 0
	:: else -> skip
	fi
}

/*
 * P4, bounded blocking: an in-progress record holds its key no longer than
 * a lease from its owner's last reservation or renewal, never past the
 * owner's deadline, and it does not expire before its in-progress expiry.
 * A held record holds its key until its expiry, by design (only the
 * operator frees it earlier): that expiry is never later than an expiry
 * from its reservation, or the end of its owner's last lease.
 */
inline checkblocking() {
	assert(!ALL || rstat != INPROGRESS || (rinp <= lend[rtok] && rinp <= t0[rtok] + DEADLINE && rexp >= rinp &&
		rexp <= max(t0[rtok] + EXPIRY, lend[rtok])))	/* P4 */
}

/*
 * The store applies write w of attempt k, sent at tm. A reservation is
 * judged at its writer's time (it carries its now); the other writes are
 * conditioned on token and status only, and judged when they arrive.
 */
inline apply(w, k, tm) {
	if
	:: w == W_RESERVE -> classify(k, tm)
	:: else -> classify(k, now)
	fi;
	out = outcome[w*NSTATES + st];
	cell = w*NSTATES + st;
	COVERCELL;
	cell = 0;
	printf("t=%d  store: ", now); print_write(w); printf(" of %d (", k);
	print_state(st); printf("): "); print_outcome(out);
	if
	:: out == O_APPLIES ->
		if
		:: rtok != k && inplive(now) ->
			gtaken[rtok] = 1;
			/* P5: only the holder's own writes change a live
			 * reservation. */
			assert(!ALL)	/* P5 */
		:: else -> skip
		fi;
		/* P3: a completed record changes only by expiry: only a
		 * reservation replaces it, once it has expired. */
		assert(!ALL || rstat != COMPLETED || (w == W_RESERVE && rexp < tm));	/* P3 */
		if
		:: w == W_RESERVE ->
			/* P6: no takeover while the holder runs and the lease
			 * that its writes set (and their replies told it) has
			 * not ended. */
			assert(!CHECKGRANTED || st != S_OTHER_LAPSED || fate[rtok] != F_RUN || granted[rtok] < tm);	/* P6 */
			rstat = INPROGRESS; rtok = k;
			rinp = leaseend(k, tm);
			rexp = max(tm + EXPIRY, rinp);
			granted[k] = (CHECKGRANTED -> max(granted[k], rinp) : 0)
		:: w == W_RENEW ->
			/* A renewal in time (the reservation still live) tells
			 * its holder that it holds the key to the new end. */
			granted[k] = ((CHECKGRANTED && st == S_OWN_IN_PROGRESS) -> max(granted[k], tm) : granted[k]);
			/* Only a deadline past a lease and a tick leaves room for
			 * a second renewal, which alone needs to know. */
			renewed[k] = (DEADLINE > LEASE + 1);
			/* The in-progress expiry becomes the later of the
			 * record's and the renewal's: a renewal applied after a
			 * later one changes nothing. Otherwise the whole
			 * in-progress record, as the caller has it.
			 * BROKEN_RENEW_BACK: the renewal's, whatever the
			 * record's was. */
			if
			:: rstat == INPROGRESS && tm < rinp && !RENEWBACK ->
				printf(", the in-progress expiry is later already: nothing changes")
			:: else ->
				rstat = INPROGRESS; rtok = k;
				rinp = tm;	/* the end of the lease it asked for */
				rexp = max(t0[k] + EXPIRY, rinp)
			fi
		:: w == W_COMPLETE || w == W_RECORD_AN_ERROR || w == W_COMMIT ->
			rstat = COMPLETED; rtok = k;
			rinp = 0;
			rexp = tm + EXPIRY;
			/* A completion whose record has expired already (all its
			 * writes applied late) does not open a window. */
			if
			:: rexp >= now -> cwin = 1
			:: else -> skip
			fi;
			if
			:: w == W_COMMIT ->
				/* P2: with transactions, the staged write applies
				 * once per window, whatever failed. */
				printf(", STAGED WRITE");
				assert(!staged);	/* P2 */
				staged = 1
			:: else -> skip
			fi
		:: w == W_RELEASE ->
			rstat = ABSENT; rtok = 0; rinp = 0; rexp = 0
		fi
	:: else -> skip
	fi;
	printf(" -> "); print_record(); printf("\n");
	if
	:: w == W_RESERVE && fate[k] == F_WAIT && now < t0[k] + DEADLINE ->
		/* The reply, to an attempt that still waits for it: before its
		 * deadline, which ends the reservation's request (the context
		 * of guard.put). It holds the key when the reservation applied,
		 * or when the conflict is with its own record (guard.put), and
		 * the reply came before the reservation's in-progress expiry;
		 * when it came later, the attempt does not run its function,
		 * and releases the reservation (errLapsedOnArrival). Otherwise
		 * it answers *InProgressError, *HeldError or the stored result,
		 * and ends. */
		if
		:: (out == O_APPLIES || rtok == k) && now < leaseend(k, t0[k]) -> fate[k] = F_RUN
		:: (out == O_APPLIES || rtok == k) && now >= leaseend(k, t0[k]) ->
			fate[k] = F_OUT; mfin[k] = 1 + W_RELEASE; tfin[k] = now;
			printf("t=%d  attempt %d: the reply came after its in-progress expiry; sends release\n", now, k)
		:: else -> fate[k] = F_OUT
		fi
	:: else -> skip
	fi;
	checkblocking();
	st = 0; out = 0
}

/*
 * P1, at most once: attempt k runs its handler's side effect. When another
 * attempt j ran its side effect in the window already, the repeat must be
 * one of the exceptions docs/guarantees.md lists:
 *  - k holds the key: then j lost the key by letting its reservation lapse
 *    (nobody took it from j while live), and no completion applied in the
 *    window. j died after its side effect (SHOW_CRASH), or its completion
 *    was sent and did not apply (SHOW_LOST), or j still runs, past its
 *    in-progress expiry (SHOW_OVERRUN);
 *  - k does not hold the key: k runs on past its in-progress expiry, and
 *    its reservation lapsed (nobody took it from k while live).
 * And whether or not the side effect repeats, an attempt that holds the key
 * runs it only if no completion applied in the window.
 *
 * With held reservations (HOLD), none of these exceptions: an attempt that
 * holds the key runs the side effect only if no other attempt ran it in
 * the window holding the key, unless an operator's release came between
 * them; and an attempt runs it without holding the key only once its
 * reservation ended without it: its record expired, which ends the window,
 * or the operator released it. So a side effect repeats only when one of
 * the two ran after its own record's expiry (SHOW_HELD_EXPIRY), or after an
 * operator's release (SHOW_HELD_RELEASE).
 *
 * Each SHOW_* assertion fails on its exception in its plain form: j held
 * the key when it ran its side effect.
 */
inline sideeffect(k) {
	printf("t=%d  attempt %d: SIDE EFFECT, ", now, k);
	if
	:: holds(k) -> printf("holding the key\n")
	:: else -> printf("not holding the key\n")
	fi;
	if
	:: holds(k) -> assert(!cwin)	/* P1 */
	:: else -> skip
	fi;
	/* Held: an attempt runs its side effect without holding the key only
	 * once its reservation ended without it (its record expired, or the
	 * operator released it). */
	assert(!HOLDING || holds(k) || lost[k]);	/* P1 */
	gj = 1;
	do
	:: gj > NTOK -> break
	:: gj <= NTOK && (gj == k || !ran[gj]) -> gj++
	:: gj <= NTOK && gj != k && ran[gj] ->
		if
		:: HOLDING ->
			/* Held: no exception for a crash, a lost completion or
			 * an overrun. Two side effects run holding the key only
			 * with an operator's release between them; otherwise
			 * one of them ran without holding it (after its record's
			 * expiry, above). */
			assert(!holds(k) || !held[gj] || acked[gj]);	/* P1 */
			assert(!SHOWHELDEXPIRY || (holds(k) && held[gj]));	/* SHOW_HELD_EXPIRY */
			assert(!SHOWHELDRELEASE || !holds(k) || !held[gj] || !acked[gj])	/* SHOW_HELD_RELEASE */
		:: !HOLDING && holds(k) ->
			assert(!gtaken[gj]);	/* P1 */
			assert(fate[gj] == F_CRASH || fate[gj] == F_SENT || fate[gj] == F_RUN);	/* P1 */
			assert(!SHOWCRASH || !held[gj] || fate[gj] != F_CRASH);	/* SHOW_CRASH */
			assert(!SHOWLOST || !held[gj] || fate[gj] != F_SENT);	/* SHOW_LOST */
			assert(!SHOWOVERRUN || !held[gj] || fate[gj] != F_RUN)	/* SHOW_OVERRUN */
		:: !HOLDING && !holds(k) ->
			assert(!gtaken[k])	/* P1 */
		fi;
		gj++
	od;
	gj = 0;
	ran[k] = 1;
	held[k] = holds(k)
}

/* The store: applies any write in the network, or deletes an expired record. */
#define RES(k) :: d_step { mres[k] -> apply(W_RESERVE, k, t0[k]) }
#define REN(k, d) :: d_step { (mren[k] >> d) & 1 -> apply(W_RENEW, k, t0[k] + d) }
#define FIN(k) :: d_step { mfin[k] != 0 -> hw = mfin[k] - 1; apply(hw, k, tfin[k]); hw = 0 }
#define TOK(k) RES(k) REN(k,1) REN(k,2) REN(k,3) REN(k,4) REN(k,5) REN(k,6) REN(k,7) FIN(k)

active proctype Store() {
end:	do
	/* An expired record may vanish at any time (DynamoDB's TTL, Redis). */
	:: d_step { rstat != ABSENT && rexp < now ->
		printf("t=%d  store: deletes the expired record of %d\n", now, rtok);
		rstat = ABSENT; rtok = 0; rinp = 0; rexp = 0 }
	TOK(1)
	TOK(2)
#if NTOK > 2
	TOK(3)
#endif
#if NTOK > 3
	TOK(4)
#endif
#if NTOK > 4
	TOK(5)
#endif
#if NTOK > 5
	TOK(6)
#endif
	od
}

#ifdef OPREL
/*
 * The operator (retrysafe release): deletes a held record past its
 * in-progress expiry, at any time. It stands for a person who checked the
 * side effect of the call that holds it, and decided that the key may run
 * again. The release is conditioned on the record being the one the
 * operator read: done at once, it is that record.
 */
active proctype Operator() {
end:	do
	:: d_step { rstat == INPROGRESS && rinp < now && !(rexp < now) ->
		printf("t=%d  operator: releases the held record of %d\n", now, rtok);
		lost[rtok] = 1;
		gj = 1;
		do
		:: gj <= NTOK -> acked[gj] = (ran[gj] -> 1 : acked[gj]); gj++
		:: else -> break
		od;
		gj = 0;
		rstat = ABSENT; rtok = 0; rinp = 0; rexp = 0 }
	od
}
#endif

/*
 * Writes that the network holds no longer: sent more than MAXDELAY ago. A
 * renewal counts as sent at the latest time it can have been, the end of
 * the lease it asks for (an attempt renews only before its deadline, so
 * never after that end), so that none is dropped early.
 */
inline dropold() {
	gj = 1;
	do
	:: gj > NTOK -> break
	:: gj <= NTOK ->
		if
		:: mres[gj] && now > t0[gj] + MAXDELAY -> mres[gj] = 0
		:: else -> skip
		fi;
		st = 1;
		do
		:: st > DEADLINE -> break
		:: st <= DEADLINE ->
			if
			:: (mren[gj] >> st) & 1 && now > t0[gj] + st + MAXDELAY ->
				mren[gj] = mren[gj] & ~(1 << st)
			:: else -> skip
			fi;
			st++
		od;
		if
		:: mfin[gj] != 0 && now > tfin[gj] + MAXDELAY -> mfin[gj] = 0; tfin[gj] = 0
		:: else -> skip
		fi;
		gj++
	od;
	gj = 0; st = 0
}

/* The clock: time passes, in ticks, up to TMAX. */
active proctype Clock() {
end:	do
	:: d_step { now < TMAX && fate[1] != F_NONE -> now++; printf("t=%d  clock\n", now); endwindow(); dropold() }
	od
}

/*
 * An invocation: its attempts one after another (a client that retries, a
 * queue that delivers again), each with a new token. NPROC invocations run
 * at once, so an attempt of one may overlap any attempt of another.
 *
 * The invocations are alike, so the model starts their first attempts in
 * order: a run in which they start in another order is one of these with
 * the invocations renamed, and no property tells them apart.
 *
 * A crash is an attempt that takes no further step. Before the side effect
 * the model needs no step for it: any run may leave an attempt where it is
 * for ever. After the side effect it has one, to tell the first exception
 * (SHOW_CRASH) from the third (SHOW_OVERRUN), and so that the invocation's
 * next attempt may begin.
 */
proctype Call(byte p) {
	byte a = 0, k = 0;
	bit effected;
	/* One loop, each step guarded by the attempt's fate, so that the
	 * store's reply (which sets the fate) moves the attempt on without a
	 * step of its own. */
end:	do
	:: d_step { a < NATT && (k == 0 || fate[k] == F_OUT || fate[k] == F_SENT || fate[k] == F_CRASH) &&
			(a > 0 || p == 0 || fate[(p-1)*NATT + 1] != F_NONE) ->
		/* guard.put: a new token, the reservation sent at now. */
		k = p*NATT + a + 1;
		a++;
		effected = 0;
		t0[k] = now; lend[k] = leaseend(k, now); mres[k] = 1; fate[k] = F_WAIT;
		printf("t=%d  attempt %d: sends reserve (in-progress expiry %d)\n", now, k, lend[k]) }
	:: d_step { fate[k] == F_WAIT ->
		/* No reply (lost, timed out): *StoreError, and the reservation,
		 * which may have landed, is released (releaseQuietly). */
		fate[k] = F_OUT; mfin[k] = 1 + W_RELEASE; tfin[k] = now;
		printf("t=%d  attempt %d: no reply to its reservation; sends release\n", now, k) }
	/* run: the handler, with its lease renewed meanwhile. */
	:: d_step { fate[k] == F_RUN && leaseend(k, now) > lend[k] && (mren[k] == 0 || renewed[k]) ->
		/* lease.renew, sent at now. The library renews again only
		 * after a renewal succeeded, so after one that applied; the
		 * model does not ask that the reply came: it has more runs than
		 * the library, which stops at a failed renewal. */
		mren[k] = mren[k] | (1 << (leaseend(k, now) - t0[k]));
		lend[k] = leaseend(k, now);
		printf("t=%d  attempt %d: sends renew (in-progress expiry %d)\n", now, k, lend[k]) }
#ifndef TX
	:: d_step { fate[k] == F_RUN && !effected -> sideeffect(k); effected = 1 }
	:: d_step { fate[k] == F_RUN && effected ->
		/* A result, or a permanent error after the side effect:
		 * complete, or record the error, which init has checked to be
		 * the same row of the table. */
		fate[k] = (ran[k] -> F_SENT : F_OUT);
		mfin[k] = 1 + W_COMPLETE; tfin[k] = now;
		printf("t=%d  attempt %d: sends complete\n", now, k) }
	:: d_step { fate[k] == F_RUN && !effected ->
		/* An error or a panic before the side effect: release. */
		fate[k] = F_OUT; mfin[k] = 1 + W_RELEASE; tfin[k] = now;
		printf("t=%d  attempt %d: the handler fails; sends release\n", now, k) }
	:: d_step { fate[k] == F_RUN && effected ->
		/* A crash after the side effect. */
		fate[k] = (ran[k] -> F_CRASH : F_OUT);
		printf("t=%d  attempt %d: crashes\n", now, k) }
#else
	/* The side effect is the staged write: it applies in the store, with
	 * the commit, or not at all. */
	:: d_step { fate[k] == F_RUN ->
		fate[k] = F_OUT; mfin[k] = 1 + W_COMMIT; tfin[k] = now;
		printf("t=%d  attempt %d: sends commit, with its staged write\n", now, k) }
	:: d_step { fate[k] == F_RUN ->
		/* A permanent error: recorded, nothing staged is written. */
		fate[k] = F_OUT; mfin[k] = 1 + W_RECORD_AN_ERROR; tfin[k] = now;
		printf("t=%d  attempt %d: sends record an error\n", now, k) }
	:: d_step { fate[k] == F_RUN ->
		fate[k] = F_OUT; mfin[k] = 1 + W_RELEASE; tfin[k] = now;
		printf("t=%d  attempt %d: the handler fails; sends release\n", now, k) }
#endif
	od
}

init {
	atomic {
		COVERINIT;
		fill_table();
#ifdef BROKEN_RENEW
		/* Renewal fenced on the token alone: it applies to the
		 * caller's own completed record, and reopens it. */
		outcome[W_RENEW*NSTATES + S_OWN_COMPLETED] = O_APPLIES;
		outcome[W_RENEW*NSTATES + S_OWN_EXPIRED] = O_APPLIES;
#endif
#ifdef BROKEN_COMPLETE
		/* Completion without the fence: it overwrites other calls'
		 * records. */
		outcome[W_COMPLETE*NSTATES + S_OTHER_IN_PROGRESS] = O_APPLIES;
		outcome[W_COMPLETE*NSTATES + S_OTHER_LAPSED] = O_APPLIES;
		outcome[W_COMPLETE*NSTATES + S_OTHER_COMPLETED] = O_APPLIES;
		outcome[W_COMPLETE*NSTATES + S_OTHER_EXPIRED] = O_APPLIES;
		outcome[W_RECORD_AN_ERROR*NSTATES + S_OTHER_IN_PROGRESS] = O_APPLIES;
		outcome[W_RECORD_AN_ERROR*NSTATES + S_OTHER_LAPSED] = O_APPLIES;
		outcome[W_RECORD_AN_ERROR*NSTATES + S_OTHER_COMPLETED] = O_APPLIES;
		outcome[W_RECORD_AN_ERROR*NSTATES + S_OTHER_EXPIRED] = O_APPLIES;
		outcome[W_COMMIT*NSTATES + S_OTHER_IN_PROGRESS] = O_APPLIES;
		outcome[W_COMMIT*NSTATES + S_OTHER_LAPSED] = O_APPLIES;
		outcome[W_COMMIT*NSTATES + S_OTHER_COMPLETED] = O_APPLIES;
		outcome[W_COMMIT*NSTATES + S_OTHER_EXPIRED] = O_APPLIES;
#endif
#ifdef BROKEN_HELD
		/* A held record taken over once it lapsed, as a record that is
		 * not held. */
		outcome[W_RESERVE*NSTATES + S_OTHER_HELD] = O_APPLIES;
#endif
#ifdef BROKEN_RELEASE
		/* A release that deletes whatever is there. */
		gj = 0;
		do
		:: gj < NSTATES -> outcome[W_RELEASE*NSTATES + gj] = O_APPLIES; gj++
		:: else -> break
		od;
		gj = 0;
#endif
#ifndef TX
		/* Recording an error is completing, with an error for a
		 * result: one write stands for both. */
		gj = 0;
		do
		:: gj < NSTATES ->
			assert(outcome[W_RECORD_AN_ERROR*NSTATES + gj] == outcome[W_COMPLETE*NSTATES + gj]);	/* TABLE */
			gj++
		:: else -> break
		od;
#endif
		gj = 0;
		do
		:: gj < NPROC -> run Call(gj); gj++
		:: else -> break
		od;
		gj = 0
	}
}
