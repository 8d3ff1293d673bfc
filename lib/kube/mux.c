/* curl multi behind one epoll fd: every list and watch of the watcher runs in
 * the service's single event loop (curl_multi_socket_action), no thread per
 * watch. Tasks (watches) also own a due time for their restarts/backoff. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "gpukmm/log.h"
#include "internal.h"

static int sock_cb(CURL *e, curl_socket_t s, int what, void *user, void *sockp)
{
	gk_kube_mux *m = user;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(m->epfd, EPOLL_CTL_DEL, s, NULL);
		return 0;
	}
	struct epoll_event ev = {0};
	ev.data.fd = s;
	if (what & CURL_POLL_IN)
		ev.events |= EPOLLIN;
	if (what & CURL_POLL_OUT)
		ev.events |= EPOLLOUT;
	if (epoll_ctl(m->epfd, EPOLL_CTL_MOD, s, &ev) && errno == ENOENT &&
	    epoll_ctl(m->epfd, EPOLL_CTL_ADD, s, &ev))
		GK_WARN("kube mux: epoll_ctl(%d): %s", (int)s, strerror(errno));
	return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *user)
{
	gk_kube_mux *m = user;
	m->curl_due_ms = timeout_ms < 0 ? -1 : gk_kube__mono_ms() + timeout_ms;
	return 0;
}

int gk_kube_mux_new(gk_kube_mux **out, gk_kube_client *c, gk_err *err)
{
	*out = NULL;
	gk_kube_mux *m = calloc(1, sizeof *m);
	if (!m)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	m->c = c;
	m->curl_due_ms = -1;
	m->tasks.next = m->tasks.prev = &m->tasks;
	m->max_calls = GK_KUBE_MAX_CALLS;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	m->multi = curl_multi_init();
	if (m->epfd < 0 || !m->multi) {
		gk_kube_mux_free(m);
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "kube mux: cannot create epoll/multi");
	}
	curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
	curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
	curl_multi_setopt(m->multi, CURLMOPT_MAXCONNECTS, 16L);
	*out = m;
	return 0;
}

void gk_kube_mux_free(gk_kube_mux *m)
{
	if (!m)
		return;
	gk_kube_mux_detach(m);
	/* async calls still in flight are dropped without their callback */
	for (gk_kube__task *t = m->tasks.next, *n; t && t != &m->tasks; t = n) {
		n = t->next;
		if (t->kill)
			t->kill(t);
	}
	if (m->tasks.next && m->tasks.next != &m->tasks)
		GK_WARN("kube mux freed with watches still running");
	if (m->multi)
		curl_multi_cleanup(m->multi);
	if (m->epfd >= 0)
		close(m->epfd);
	free(m);
}

int gk_kube_mux_fd(const gk_kube_mux *m)
{
	return m->epfd;
}

int64_t gk_kube_mux_timeout_ms(gk_kube_mux *m)
{
	int64_t due = m->curl_due_ms;
	for (gk_kube__task *t = m->tasks.next; t != &m->tasks; t = t->next)
		if (t->due_ms >= 0 && (due < 0 || t->due_ms < due))
			due = t->due_ms;
	if (due < 0)
		return -1;
	int64_t d = due - gk_kube__mono_ms();
	return d < 0 ? 0 : d;
}

void gk_kube__mux_add_task(gk_kube_mux *m, gk_kube__task *t)
{
	t->next = m->tasks.next;
	t->prev = &m->tasks;
	m->tasks.next->prev = t;
	m->tasks.next = t;
}

void gk_kube__mux_del_task(gk_kube_mux *m, gk_kube__task *t)
{
	if (!t->next)
		return;
	t->prev->next = t->next;
	t->next->prev = t->prev;
	t->next = t->prev = NULL;
}

int gk_kube__mux_start(gk_kube_mux *m, CURL *e)
{
	CURLMcode mc = curl_multi_add_handle(m->multi, e);
	return mc == CURLM_OK ? 0 : -1;
}

void gk_kube__mux_stop(gk_kube_mux *m, CURL *e)
{
	curl_multi_remove_handle(m->multi, e);
}

static int drain_done(gk_kube_mux *m)
{
	int n = 0, left;
	CURLMsg *msg;
	while ((msg = curl_multi_info_read(m->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURL *e = msg->easy_handle;
		CURLcode cc = msg->data.result;
		gk_kube__task *t = NULL;
		curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&t);
		curl_multi_remove_handle(m->multi, e);
		gk_kube__observe(m->c, e);
		n++;
		if (t && t->done)
			t->done(t, cc); /* may restart e, or free the task */
	}
	return n;
}

int gk_kube_mux_run(gk_kube_mux *m)
{
	struct epoll_event evs[32];
	int running, n = epoll_wait(m->epfd, evs, 32, 0);
	for (int i = 0; i < n; i++) {
		int fl = 0;
		if (evs[i].events & EPOLLIN)
			fl |= CURL_CSELECT_IN;
		if (evs[i].events & EPOLLOUT)
			fl |= CURL_CSELECT_OUT;
		if (evs[i].events & (EPOLLERR | EPOLLHUP))
			fl |= CURL_CSELECT_ERR;
		curl_multi_socket_action(m->multi, evs[i].data.fd, fl, &running);
	}
	int64_t now = gk_kube__mono_ms();
	if (m->curl_due_ms >= 0 && m->curl_due_ms <= now) {
		m->curl_due_ms = -1;
		curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	}
	int done = drain_done(m);
	/* due tasks: restart after a single pass over a snapshot of due ones, since
	 * fire may add/remove tasks */
	for (;;) {
		gk_kube__task *due = NULL;
		now = gk_kube__mono_ms();
		for (gk_kube__task *t = m->tasks.next; t != &m->tasks; t = t->next)
			if (t->due_ms >= 0 && t->due_ms <= now) {
				due = t;
				break;
			}
		if (!due)
			break;
		due->due_ms = -1;
		due->fire(due);
	}
	/* starting transfers may have completed synchronously (e.g. refused) */
	curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	done += drain_done(m);
	gk_kube__mux_changed(m);
	return done;
}
