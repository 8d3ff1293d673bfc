/* libFuzzer target: bytes -> YAML/JSON documents -> ClusterPolicy validation ->
 * Module rendering -> typed Module -> diff (a rendered Module read back needs no
 * write) -> KMM's admission (a valid policy renders what KMM accepts); and the
 * bytes as an AdmissionReview to the webhook. Built and run by tests/fuzz/run.sh
 * (make fuzz; a bounded run in make check through tests/ipc/fuzz.sh), seeds in
 * tests/fuzz/seeds/policy. The Criterion twin is tests/unit/policy_fuzz_test.c. */
// fuzz-sources: lib/policy/*.c lib/policy/*.cc lib/kobj/*.c lib/yamljson/*.c lib/base/kmap.c lib/kube/selector.c lib/log/*.c services/webhook/admission.c
// fuzz-pkgs: yaml-0.1 libcrypto
// fuzz-libs: -lre2
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../services/webhook/admission.h"
#include "policy_pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[512];
	if (policy_pipeline((const char *)data, size, true, why, sizeof(why)))
		abort();
	gk_webhook_result res;
	gk_webhook_review(GK_WEBHOOK_VALIDATE, (const char *)data, size, NULL, &res);
	gk_webhook_result_free(&res);
	return 0;
}
