/* Generated from internal/protocol (go test ./internal/protocol -update); do not edit. */

#define W_RESERVE 0
#define W_RENEW 1
#define W_COMPLETE 2
#define W_RECORD_AN_ERROR 3
#define W_RELEASE 4
#define W_COMMIT 5
#define NWRITES 6

#define S_ABSENT 0
#define S_OWN_IN_PROGRESS 1
#define S_OWN_LAPSED 2
#define S_OTHER_IN_PROGRESS 3
#define S_OTHER_LAPSED 4
#define S_OWN_COMPLETED 5
#define S_OWN_EXPIRED 6
#define S_OTHER_COMPLETED 7
#define S_OTHER_EXPIRED 8
#define S_OWN_HELD 9
#define S_OTHER_HELD 10
#define NSTATES 11

#define O_APPLIES 1
#define O_CONFLICT 2
#define O_REFUSED 3
#define O_DONE 4

/*
 * outcome[w*NSTATES+s] is the outcome of write w in state s, once
 * fill_table has run. A model that fills it before its search starts may
 * define OUTCOME_HIDDEN to keep it out of the state vector.
 */
#ifdef OUTCOME_HIDDEN
hidden byte outcome[NWRITES*NSTATES];
#else
byte outcome[NWRITES*NSTATES];
#endif

inline fill_table() {
	outcome[W_RESERVE*NSTATES+S_ABSENT] = O_APPLIES;
	outcome[W_RESERVE*NSTATES+S_OWN_IN_PROGRESS] = O_CONFLICT;
	outcome[W_RESERVE*NSTATES+S_OWN_LAPSED] = O_APPLIES;
	outcome[W_RESERVE*NSTATES+S_OTHER_IN_PROGRESS] = O_CONFLICT;
	outcome[W_RESERVE*NSTATES+S_OTHER_LAPSED] = O_APPLIES;
	outcome[W_RESERVE*NSTATES+S_OWN_COMPLETED] = O_CONFLICT;
	outcome[W_RESERVE*NSTATES+S_OWN_EXPIRED] = O_APPLIES;
	outcome[W_RESERVE*NSTATES+S_OTHER_COMPLETED] = O_CONFLICT;
	outcome[W_RESERVE*NSTATES+S_OTHER_EXPIRED] = O_APPLIES;
	outcome[W_RESERVE*NSTATES+S_OWN_HELD] = O_CONFLICT;
	outcome[W_RESERVE*NSTATES+S_OTHER_HELD] = O_CONFLICT;
	outcome[W_RENEW*NSTATES+S_ABSENT] = O_REFUSED;
	outcome[W_RENEW*NSTATES+S_OWN_IN_PROGRESS] = O_APPLIES;
	outcome[W_RENEW*NSTATES+S_OWN_LAPSED] = O_APPLIES;
	outcome[W_RENEW*NSTATES+S_OTHER_IN_PROGRESS] = O_REFUSED;
	outcome[W_RENEW*NSTATES+S_OTHER_LAPSED] = O_REFUSED;
	outcome[W_RENEW*NSTATES+S_OWN_COMPLETED] = O_REFUSED;
	outcome[W_RENEW*NSTATES+S_OWN_EXPIRED] = O_REFUSED;
	outcome[W_RENEW*NSTATES+S_OTHER_COMPLETED] = O_REFUSED;
	outcome[W_RENEW*NSTATES+S_OTHER_EXPIRED] = O_REFUSED;
	outcome[W_RENEW*NSTATES+S_OWN_HELD] = O_APPLIES;
	outcome[W_RENEW*NSTATES+S_OTHER_HELD] = O_REFUSED;
	outcome[W_COMPLETE*NSTATES+S_ABSENT] = O_REFUSED;
	outcome[W_COMPLETE*NSTATES+S_OWN_IN_PROGRESS] = O_APPLIES;
	outcome[W_COMPLETE*NSTATES+S_OWN_LAPSED] = O_APPLIES;
	outcome[W_COMPLETE*NSTATES+S_OTHER_IN_PROGRESS] = O_REFUSED;
	outcome[W_COMPLETE*NSTATES+S_OTHER_LAPSED] = O_REFUSED;
	outcome[W_COMPLETE*NSTATES+S_OWN_COMPLETED] = O_DONE;
	outcome[W_COMPLETE*NSTATES+S_OWN_EXPIRED] = O_DONE;
	outcome[W_COMPLETE*NSTATES+S_OTHER_COMPLETED] = O_REFUSED;
	outcome[W_COMPLETE*NSTATES+S_OTHER_EXPIRED] = O_REFUSED;
	outcome[W_COMPLETE*NSTATES+S_OWN_HELD] = O_APPLIES;
	outcome[W_COMPLETE*NSTATES+S_OTHER_HELD] = O_REFUSED;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_ABSENT] = O_REFUSED;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OWN_IN_PROGRESS] = O_APPLIES;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OWN_LAPSED] = O_APPLIES;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OTHER_IN_PROGRESS] = O_REFUSED;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OTHER_LAPSED] = O_REFUSED;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OWN_COMPLETED] = O_DONE;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OWN_EXPIRED] = O_DONE;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OTHER_COMPLETED] = O_REFUSED;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OTHER_EXPIRED] = O_REFUSED;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OWN_HELD] = O_APPLIES;
	outcome[W_RECORD_AN_ERROR*NSTATES+S_OTHER_HELD] = O_REFUSED;
	outcome[W_RELEASE*NSTATES+S_ABSENT] = O_DONE;
	outcome[W_RELEASE*NSTATES+S_OWN_IN_PROGRESS] = O_APPLIES;
	outcome[W_RELEASE*NSTATES+S_OWN_LAPSED] = O_APPLIES;
	outcome[W_RELEASE*NSTATES+S_OTHER_IN_PROGRESS] = O_REFUSED;
	outcome[W_RELEASE*NSTATES+S_OTHER_LAPSED] = O_REFUSED;
	outcome[W_RELEASE*NSTATES+S_OWN_COMPLETED] = O_REFUSED;
	outcome[W_RELEASE*NSTATES+S_OWN_EXPIRED] = O_REFUSED;
	outcome[W_RELEASE*NSTATES+S_OTHER_COMPLETED] = O_REFUSED;
	outcome[W_RELEASE*NSTATES+S_OTHER_EXPIRED] = O_REFUSED;
	outcome[W_RELEASE*NSTATES+S_OWN_HELD] = O_APPLIES;
	outcome[W_RELEASE*NSTATES+S_OTHER_HELD] = O_REFUSED;
	outcome[W_COMMIT*NSTATES+S_ABSENT] = O_REFUSED;
	outcome[W_COMMIT*NSTATES+S_OWN_IN_PROGRESS] = O_APPLIES;
	outcome[W_COMMIT*NSTATES+S_OWN_LAPSED] = O_APPLIES;
	outcome[W_COMMIT*NSTATES+S_OTHER_IN_PROGRESS] = O_REFUSED;
	outcome[W_COMMIT*NSTATES+S_OTHER_LAPSED] = O_REFUSED;
	outcome[W_COMMIT*NSTATES+S_OWN_COMPLETED] = O_DONE;
	outcome[W_COMMIT*NSTATES+S_OWN_EXPIRED] = O_DONE;
	outcome[W_COMMIT*NSTATES+S_OTHER_COMPLETED] = O_REFUSED;
	outcome[W_COMMIT*NSTATES+S_OTHER_EXPIRED] = O_REFUSED;
	outcome[W_COMMIT*NSTATES+S_OWN_HELD] = O_APPLIES;
	outcome[W_COMMIT*NSTATES+S_OTHER_HELD] = O_REFUSED;
}

inline print_write(w) {
	if
	:: w == W_RESERVE -> printf("reserve")
	:: w == W_RENEW -> printf("renew")
	:: w == W_COMPLETE -> printf("complete")
	:: w == W_RECORD_AN_ERROR -> printf("record an error")
	:: w == W_RELEASE -> printf("release")
	:: w == W_COMMIT -> printf("commit")
	fi
}

inline print_state(s) {
	if
	:: s == S_ABSENT -> printf("absent")
	:: s == S_OWN_IN_PROGRESS -> printf("own in progress")
	:: s == S_OWN_LAPSED -> printf("own lapsed")
	:: s == S_OTHER_IN_PROGRESS -> printf("other in progress")
	:: s == S_OTHER_LAPSED -> printf("other lapsed")
	:: s == S_OWN_COMPLETED -> printf("own completed")
	:: s == S_OWN_EXPIRED -> printf("own expired")
	:: s == S_OTHER_COMPLETED -> printf("other completed")
	:: s == S_OTHER_EXPIRED -> printf("other expired")
	:: s == S_OWN_HELD -> printf("own held")
	:: s == S_OTHER_HELD -> printf("other held")
	fi
}

inline print_outcome(o) {
	if
	:: o == O_APPLIES -> printf("applies")
	:: o == O_CONFLICT -> printf("conflict")
	:: o == O_REFUSED -> printf("refused")
	:: o == O_DONE -> printf("done")
	fi
}
