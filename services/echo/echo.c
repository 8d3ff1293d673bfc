/* gpukmm-echo handlers: Echo (answers text+data), Slow (waits delay_ms first:
 * the handler blocks the dispatch thread on purpose, to let tests observe a
 * call in flight), Fail (answers with fail_code), Add (mutating counter). */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "echo.h"
#include "gpukmm/err.h"
#include "gpukmm/ipc.h"

const char *const gk_echo_mutating[] = { "Add", NULL };

static gk_echo *self(Gpukmm__Echo_Service *svc)
{
	return (gk_echo *)svc;
}

static void reply_with(gk_echo *e, const Gpukmm__EchoRequest *in, Gpukmm__EchoReply_Closure closure,
		       void *cd)
{
	Gpukmm__EchoReply r = GPUKMM__ECHO_REPLY__INIT;
	r.text = in->text;
	r.has_data = in->has_data;
	r.data = in->data;
	r.has_server_pid = 1;
	r.server_pid = (int32_t)getpid();
	r.has_count = 1;
	r.count = e->counter;
	closure(&r, cd);
}

static void echo_echo(Gpukmm__Echo_Service *svc, const Gpukmm__EchoRequest *in,
		      Gpukmm__EchoReply_Closure closure, void *cd)
{
	gk_echo *e = self(svc);
	e->calls++;
	reply_with(e, in, closure, cd);
}

static void echo_slow(Gpukmm__Echo_Service *svc, const Gpukmm__EchoRequest *in,
		      Gpukmm__EchoReply_Closure closure, void *cd)
{
	gk_echo *e = self(svc);
	e->calls++;
	uint32_t ms = in->delay_ms;
	if (ms > e->max_delay_ms) {
		gk_ipc_fail(cd, GK_OUT_OF_RANGE, "delay_ms %u is over the limit %u", ms, e->max_delay_ms);
		return;
	}
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	reply_with(e, in, closure, cd);
}

static void echo_fail(Gpukmm__Echo_Service *svc, const Gpukmm__EchoRequest *in,
		      Gpukmm__EchoReply_Closure closure, void *cd)
{
	gk_echo *e = self(svc);
	e->calls++;
	if (in->fail_code == 0) {
		reply_with(e, in, closure, cd);
		return;
	}
	gk_ipc_fail(cd, in->fail_code, "failed as asked%s%s", in->text ? ": " : "",
		    in->text ? in->text : "");
}

static void echo_add(Gpukmm__Echo_Service *svc, const Gpukmm__EchoRequest *in,
		     Gpukmm__EchoReply_Closure closure, void *cd)
{
	gk_echo *e = self(svc);
	e->calls++;
	e->counter++;
	reply_with(e, in, closure, cd);
}

void gk_echo_init(gk_echo *e)
{
	*e = (gk_echo){ .service = GPUKMM__ECHO__INIT(echo_), .max_delay_ms = 60000 };
}
