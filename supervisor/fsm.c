/* The life of one supervised service as a state × event table, read like
 * s6-supervise's actions[state][event]: a row per state, a column per event,
 * each cell the action to run and the state that follows (-1: the action
 * decides, e.g. a death becomes backoff, failed or down by the restart policy).
 *
 * Conventions:
 *   - a HANG (heartbeats stopped, or not ready in time) kills the process group
 *     and stays in its state: the EXIT that follows is a death like any other,
 *     so it is counted, backed off and restarted;
 *   - a TIMEOUT means "this service's one timer fired": the backoff delay in
 *     backoff, the stop timeout in stopping, the liveness check in starting/ready;
 *   - events that cannot matter in a state are NOPs (a late Ready from a pid
 *     being stopped, a stray EXIT of an unknown pid, a second STOP). */
#include "sup.h"

#define T(a, n) { GK_SUP_A_##a, n }
#define DECIDE (-1)

static const gk_sup_trans table[GK_SUP_NSTATES][GK_SUP_NEVENTS] = {
	/*               START                   READY                    EXIT                     TIMEOUT                     HANG                       STOP                        */
	[GK_SUP_DOWN]     = { T(SPAWN, GK_SUP_STARTING), T(NOP, GK_SUP_DOWN),    T(NOP, GK_SUP_DOWN),      T(NOP, GK_SUP_DOWN),        T(NOP, GK_SUP_DOWN),       T(NOP, GK_SUP_DOWN) },
	[GK_SUP_STARTING] = { T(NOP, GK_SUP_STARTING),   T(UP, GK_SUP_READY),    T(DIED, DECIDE),          T(LIVENESS, GK_SUP_STARTING), T(KILL, GK_SUP_STARTING), T(TERM, GK_SUP_STOPPING) },
	[GK_SUP_READY]    = { T(NOP, GK_SUP_READY),      T(NOP, GK_SUP_READY),   T(DIED, DECIDE),          T(LIVENESS, GK_SUP_READY),  T(KILL, GK_SUP_READY),     T(TERM, GK_SUP_STOPPING) },
	[GK_SUP_STOPPING] = { T(NOP, GK_SUP_STOPPING),   T(NOP, GK_SUP_STOPPING), T(STOPPED, GK_SUP_DOWN), T(KILL, GK_SUP_STOPPING),   T(NOP, GK_SUP_STOPPING),   T(NOP, GK_SUP_STOPPING) },
	[GK_SUP_BACKOFF]  = { T(NOP, GK_SUP_BACKOFF),    T(NOP, GK_SUP_BACKOFF), T(NOP, GK_SUP_BACKOFF),   T(SPAWN, GK_SUP_STARTING),  T(NOP, GK_SUP_BACKOFF),    T(CANCEL, GK_SUP_DOWN) },
	[GK_SUP_FAILED]   = { T(SPAWN, GK_SUP_STARTING), T(NOP, GK_SUP_FAILED),  T(NOP, GK_SUP_FAILED),    T(NOP, GK_SUP_FAILED),      T(NOP, GK_SUP_FAILED),     T(NOP, GK_SUP_FAILED) },
};

gk_sup_trans gk_sup_fsm(enum gk_sup_state s, enum gk_sup_event e)
{
	if ((unsigned)s >= GK_SUP_NSTATES || (unsigned)e >= GK_SUP_NEVENTS)
		return (gk_sup_trans){ GK_SUP_A_NOP, (int)s };
	return table[s][e];
}

const char *gk_sup_state_name(enum gk_sup_state s)
{
	static const char *const n[GK_SUP_NSTATES] = {
		"down", "starting", "ready", "stopping", "backoff", "failed",
	};
	return (unsigned)s < GK_SUP_NSTATES ? n[s] : "?";
}

const char *gk_sup_event_name(enum gk_sup_event e)
{
	static const char *const n[GK_SUP_NEVENTS] = {
		"start", "ready", "exit", "timeout", "hang", "stop",
	};
	return (unsigned)e < GK_SUP_NEVENTS ? n[e] : "?";
}

const char *gk_sup_action_name(enum gk_sup_action a)
{
	static const char *const n[] = {
		"nop", "spawn", "up", "died", "term", "kill", "stopped", "cancel", "liveness",
	};
	return (unsigned)a < sizeof(n) / sizeof(n[0]) ? n[a] : "?";
}
