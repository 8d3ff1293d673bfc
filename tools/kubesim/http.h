/* kubesim — the HTTP(S) front end on libmicrohttpd (one thread per connection, so a
 * watch body can block until the next event). */
#ifndef KUBESIM_HTTP_H
#define KUBESIM_HTTP_H

#include "kubesim.h"

struct ks_http;

/* host "127.0.0.1", port 0 = ephemeral. cert/key PEM text or NULL for plain HTTP. */
struct ks_http *ks_http_start(ks_server *s, const char *host, int port, const char *cert_pem, const char *key_pem,
			      gk_err *err);
int ks_http_port(const struct ks_http *h);
void ks_http_stop(struct ks_http *h);

#endif
