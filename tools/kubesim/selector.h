/* kubesim — label and field selectors: lib/kube's (gpukmm/kube.h), under the
 * names kubesim's handlers use. */
#ifndef KUBESIM_SELECTOR_H
#define KUBESIM_SELECTOR_H

#include <cJSON.h>

#include "gpukmm/kube.h"

typedef gk_selector ks_selector;
typedef gk_sel_term ks_sel_term;
#define KS_SEL_MAX_TERMS GK_SEL_MAX_TERMS
#define KS_SEL_MAX_VALUES GK_SEL_MAX_VALUES
#define ks_label_selector_parse gk_label_selector_parse
#define ks_field_selector_parse gk_field_selector_parse
#define ks_selector_free gk_selector_free
#define ks_label_selector_match gk_label_selector_match_json
#define ks_field_selector_match gk_field_selector_match_json
#define ks_field_value gk_field_value

#endif
