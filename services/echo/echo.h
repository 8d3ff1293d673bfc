/* gpukmm-echo — the example service (proto/echo.proto): its handlers, apart
 * from main() so tests can serve Echo in-process. */
#ifndef GPUKMM_ECHO_H
#define GPUKMM_ECHO_H

#include <stdint.h>

#include "echo.pb-c.h"

typedef struct gk_echo {
	Gpukmm__Echo_Service service;   /* first: handlers cast back to gk_echo */
	uint64_t counter;               /* Add */
	uint64_t calls;                 /* every handled call (heartbeat counter) */
	uint32_t max_delay_ms;          /* Slow: cap on delay_ms */
} gk_echo;

/* Methods whose replies the server caches for dedupe (pass to gk_ipc_server_add). */
extern const char *const gk_echo_mutating[];

void gk_echo_init(gk_echo *e);

#endif
