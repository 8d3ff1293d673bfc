/* libFuzzer target: lib/probe's sysfs/procfs/efivars parsers on arbitrary bytes
 * (built and run by tests/fuzz/run.sh, `make fuzz`). The first input byte
 * selects the parser; the rest is the file content. The same parsers also run
 * under a Criterion mutation corpus in tests/unit/probe_parse_test.c
 * (probe_fuzz), which make check runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/probe.h"
/* run.sh links a fixed set of lib sources; the pure parsers come in here (-Ilib) */
#include "probe/parse.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	const char *buf = (const char *)data + 1;
	size_t len = size - 1;
	char out[64];
	gk_err e;
	uint32_t v;
	int64_t i;
	Gpukmm__TriState t;
	gk_probe_procmod pm;
	switch (sel % 8) {
	case 0: gk_probe_parse_line(buf, len, out, sizeof out, &e); break;
	case 1: gk_probe_parse_hex(buf, len, 0xffffff, &v, &e); break;
	case 2: gk_probe_parse_int(buf, len, -1, 65535, &i, &e); break;
	case 3: gk_probe_parse_secureboot((const uint8_t *)buf, len, &t, &e); break;
	case 4: gk_probe_parse_lockdown(buf, len, out, sizeof out, &e); break;
	case 5: gk_probe_parse_proc_modules(buf, len, "xe", &pm, &e); break;
	case 6: (void)gk_probe_builtin_has(buf, len, "xe"); break;
	default: {
		char *name = malloc(len + 1); /* module-name validation on NUL-terminated text */
		if (!name)
			return 0;
		memcpy(name, buf, len);
		name[len] = 0;
		(void)gk_probe_valid_module_name(name);
		free(name);
	}
	}
	return 0;
}
