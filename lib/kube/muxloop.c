/* The mux on a gk_loop (gk_kube_mux_attach): the one piece of plumbing every
 * program with watches or async calls needs — fd readable → run, deadline →
 * run, and keep exactly one timer armed for the next deadline. */
#include <sys/epoll.h>

#include "gpukmm/loop.h"
#include "internal.h"

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	gk_kube_mux *m = user;
	m->timer = 0;
	m->timer_due_ms = -1;
	gk_kube_mux_run(m); /* re-arms on its way out */
}

static void on_fd(gk_loop *l, int fd, uint32_t ev, void *user)
{
	gk_kube_mux_run(user);
}

void gk_kube__mux_changed(gk_kube_mux *m)
{
	if (!m->loop)
		return;
	int64_t t = gk_kube_mux_timeout_ms(m);
	int64_t due = t < 0 ? -1 : gk_kube__mono_ms() + t;
	if (m->timer && due == m->timer_due_ms)
		return; /* already armed for that deadline: no churn per run */
	if (m->timer)
		gk_loop_cancel(m->loop, m->timer);
	m->timer = 0;
	m->timer_due_ms = due;
	if (t >= 0)
		m->timer = gk_loop_timer(m->loop, t, on_timer, m);
}

int gk_kube_mux_attach(gk_kube_mux *m, gk_loop *loop, gk_err *err)
{
	if (m->loop)
		return gk_err_set(err, GK_FAILED_PRECONDITION, "kube mux: already attached");
	int rc = gk_loop_add_fd(loop, m->epfd, EPOLLIN, on_fd, m, err);
	if (rc)
		return rc;
	m->loop = loop;
	m->timer = 0;
	m->timer_due_ms = -1;
	gk_kube__mux_changed(m);
	return 0;
}

void gk_kube_mux_detach(gk_kube_mux *m)
{
	if (!m || !m->loop)
		return;
	if (m->timer)
		gk_loop_cancel(m->loop, m->timer);
	gk_loop_del_fd(m->loop, m->epfd);
	m->timer = 0;
	m->loop = NULL;
}
