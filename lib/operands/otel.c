/* lib/operands: the XPU Manager's OpenTelemetry collector configuration
 * (operands.md §7.4). Upstream parses its embedded otel-config.yaml into typed
 * structs, edits the log level, interval and temperature thresholds, and
 * re-marshals with sigs.k8s.io/yaml (JSON, then go-yaml v2: keys sorted,
 * block sequences not indented under their key, strings that would read as
 * numbers double-quoted, strings starting with an indicator single-quoted,
 * omitempty fields and comments dropped). The hash of that exact text goes into
 * the pod template, so the text below is that serialisation, with the four
 * values the policy sets left as holes. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/yamljson.h"
#include "internal.h"

static const char OTEL[] =
	"exporters:\n"
	"  intelxpuinfo:\n"
	"    endpoint: /run/xpumd/intelxpuinfo.sock\n"
	"    hw_status_mappings:\n"
	"    - filters:\n"
	"      - key: hw.type\n"
	"        values:\n"
	"        - memory\n"
	"      health_domain: memory\n"
	"      state_mapping:\n"
	"        '*':\n"
	"          message: Unexpected memory health state, mapped to warning\n"
	"          severity: warning\n"
	"        critical:\n"
	"          severity: critical\n"
	"        degraded:\n"
	"          severity: warning\n"
	"        ok:\n"
	"          severity: ok\n"
	"        replace:\n"
	"          severity: critical\n"
	"        unknown:\n"
	"          severity: unknown\n"
	"    - filters:\n"
	"      - key: hw.type\n"
	"        values:\n"
	"        - gpu\n"
	"      - key: hw.state\n"
	"        values:\n"
	"        - ecc_disabled\n"
	"        - ecc_enabled\n"
	"        - ecc_available\n"
	"        - ecc_unavailable\n"
	"      health_domain: gpu\n"
	"      state_mapping: {}\n"
	"    - health_domain: '{{ .hw_type }}'\n"
	"      state_mapping:\n"
	"        '*':\n"
	"          severity: warning\n"
	"        critical:\n"
	"          severity: critical\n"
	"        failed:\n"
	"          severity: failed\n"
	"        ok:\n"
	"          severity: ok\n"
	"        unknown:\n"
	"          severity: unknown\n"
	"        warning:\n"
	"          severity: warning\n"
	"  prometheus:\n"
	"    endpoint: 0.0.0.0:8080\n"
	"processors:\n"
	"  intelxpustatus:\n"
	"    rules:\n"
	"    - add_attributes:\n"
	"        hw.type: temperature\n"
	"      component_filters:\n"
	"      - key: hw.sensor_location\n"
	"        values:\n"
	"        - gpu\n"
	"      copy_attributes:\n"
	"      - hw.id\n"
	"      - hw.name\n"
	"      - pci.bdf\n"
	"      - hw.sensor_location\n"
	"      - com.intel.subdevice_id\n"
	"      name: Intel GPU core temperature health\n"
	"      parent_filters:\n"
	"      - key: pci.vendor_id\n"
	"        values:\n"
	"        - \"8086\"\n"
	"      parent_metric: hw.gpu.info\n"
	"      parent_ref_attribute: hw.id\n"
	"      source_metric: hw.temperature\n"
	"      states:\n"
	"      - state_name: ok\n"
	"      - conditions:\n"
	"        - value: %d\n"
	"        state_name: critical\n"
	"    - add_attributes:\n"
	"        hw.type: temperature\n"
	"      component_filters:\n"
	"      - key: hw.sensor_location\n"
	"        values:\n"
	"        - memory\n"
	"      copy_attributes:\n"
	"      - hw.id\n"
	"      - hw.name\n"
	"      - pci.bdf\n"
	"      - hw.sensor_location\n"
	"      - com.intel.subdevice_id\n"
	"      name: Intel GPU memory temperature health\n"
	"      parent_filters:\n"
	"      - key: pci.vendor_id\n"
	"        values:\n"
	"        - \"8086\"\n"
	"      parent_metric: hw.gpu.info\n"
	"      parent_ref_attribute: hw.id\n"
	"      source_metric: hw.temperature\n"
	"      states:\n"
	"      - state_name: ok\n"
	"      - conditions:\n"
	"        - value: %d\n"
	"        state_name: critical\n"
	"receivers:\n"
	"  intelxpu:\n"
	"    collection_interval: %s\n"
	"    initial_delay: 1s\n"
	"    sampling_interval: 1s\n"
	"    timeout: 0\n"
	"service:\n"
	"  pipelines:\n"
	"    logs:\n"
	"      exporters:\n"
	"      - intelxpuinfo\n"
	"      receivers:\n"
	"      - intelxpu\n"
	"    metrics:\n"
	"      exporters:\n"
	"      - intelxpuinfo\n"
	"      - prometheus\n"
	"      processors:\n"
	"      - intelxpustatus\n"
	"      receivers:\n"
	"      - intelxpu\n"
	"  telemetry:\n"
	"    logs:\n"
	"      level: %s\n";

char *gk_op_otel_config(const Gpukmm__ClusterPolicy *cp)
{
	const Gpukmm__ClusterPolicySpec *s = cp && cp->spec ? cp->spec : NULL;
	/* max(spec.logLevel, xpu.logLevel), absent = 0: 0 error, 1 warn, 2 info, else debug */
	int32_t lvl = s && s->has_log_level ? s->log_level : 0;
	if (s && s->xpu && s->xpu->has_log_level && s->xpu->log_level > lvl)
		lvl = s->xpu->log_level;
	const char *level = lvl == 0 ? "error" : lvl == 1 ? "warn" : lvl == 2 ? "info" : "debug";
	char interval[32] = "5s";
	int core = 100, mem = 100;
	const Gpukmm__HealthSpec *h = s ? s->health : NULL;
	if (h) {
		/* absent fields: the CRD defaults (5 s, 100, 100) */
		snprintf(interval, sizeof(interval), "%ds", h->has_check_interval_seconds ? h->check_interval_seconds : 5);
		core = h->has_core_temperature_threshold ? h->core_temperature_threshold : 100;
		mem = h->has_memory_temperature_threshold ? h->memory_temperature_threshold : 100;
	}
	char *out = NULL;
	if (asprintf(&out, OTEL, core, mem, interval, level) < 0)
		return NULL;
	return out;
}

void gk_op_sha256_hex(const char *text, char out[65])
{
	unsigned char md[32];
	unsigned int len = 0;
	out[0] = 0;
	if (!EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL) || len != 32)
		return;
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int gk_op_otel_check(const char *text, char *msg, size_t cap)
{
	gk_yamljson_docs d = { 0 };
	gk_err e = { 0 };
	if (gk_yamljson_parse(text, strlen(text), &d, &e) != GK_OK) {
		snprintf(msg, cap, "failed to parse OTel config from override ConfigMap: %s", e.msg);
		return -1;
	}
	int rc = 0;
	const cJSON *root = d.n ? d.doc[0] : NULL;
	static const char *const sections[] = { "receivers", "processors", "exporters", "service", "extensions" };
	if (root && !cJSON_IsNull(root) && !cJSON_IsObject(root)) {
		snprintf(msg, cap, "failed to parse OTel config from override ConfigMap: the document is not a mapping");
		rc = -1;
	}
	for (size_t i = 0; !rc && cJSON_IsObject(root) && i < sizeof(sections) / sizeof(sections[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, sections[i]);
		if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v)) {
			snprintf(msg, cap, "failed to parse OTel config from override ConfigMap: %s is not a mapping",
				 sections[i]);
			rc = -1;
		}
	}
	gk_yamljson_free(&d);
	return rc;
}
