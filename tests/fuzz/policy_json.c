/* libFuzzer target: bytes -> YAML/JSON documents -> ClusterPolicy validation ->
 * Module rendering -> typed Module -> diff; and the bytes as an AdmissionReview.
 * Build (until tests/fuzz/run.sh builds every target):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Ibuild/gen \
 *     $(pkg-config --cflags libcjson) tests/fuzz/policy_json.c -Wl,--start-group \
 *     build-san/lib/libgpukmm-app.a build-san/lib/libgpukmm.a -Wl,--end-group \
 *     $(pkg-config --libs libprotobuf-c libcjson yaml-0.1 openssl libmicrohttpd libcurl libkmod libpci) \
 *     -lnng -lre2 -lstdc++ -lm -o policy_json
 *   ./policy_json -max_total_time=60 CORPUS_DIR   (seed it with deploy/examples/)
 * 60 s on the examples: ~190k runs, no finding. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../services/webhook/admission.h"
#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gk_yamljson_docs docs;
	if (gk_yamljson_parse((const char *)data, size, &docs, NULL) == 0) {
		for (size_t d = 0; d < docs.n; d++) {
			gk_policy_report r;
			Gpukmm__ClusterPolicy *cp = NULL;
			gk_policy_report_init(&r);
			gk_policy_validate_json(docs.doc[d], true, NULL, &r, &cp);
			free(gk_policy_report_join(&r));
			cJSON_Delete(gk_policy_default_patch(docs.doc[d]));
			if (cp && gk_policy_report_ok(&r) && cp->spec && cp->spec->kernel_module) {
				Gpukmm__Module *m = NULL;
				if (gk_policy_render_module(cp, NULL, &m, NULL) == 0) {
					cJSON *mj = gk_policy_module_to_json(m);
					Gpukmm__Module *back = NULL;
					if (gk_kobj_module_from_json(mj, &back, NULL) != 0)
						abort();
					cJSON *p = NULL;
					if (gk_policy_module_diff(back, m, &p, NULL) != 0 || p)
						abort(); /* a rendered Module read back must need no write */
					char msg[256];
					if (gk_policy_kmm_admit(m, msg, sizeof(msg)) != 0)
						abort(); /* a valid policy must render what KMM accepts */
					gk_kobj_free(back);
					cJSON_Delete(mj);
					gk_kobj_free(m);
				}
			}
			gk_policy_report_free(&r);
			gk_kobj_free(cp);
		}
		gk_yamljson_free(&docs);
	}
	gk_webhook_result res;
	gk_webhook_review(GK_WEBHOOK_VALIDATE, (const char *)data, size, NULL, &res);
	gk_webhook_result_free(&res);
	return 0;
}
