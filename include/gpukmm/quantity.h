/* gpukmm — Kubernetes resource quantities ("500m", "16Gi", "1.5", "2e3"), exactly.
 *
 * A quantity is kept as an exact count of nano-units (10^-9), as the API server
 * keeps it: a value more precise than a nano-unit is rounded up (away from
 * zero), as resource.ParseQuantity does. Sums of quantities are exact;
 * gk_qty_value() is Quantity.Value(): the integer count, rounded up. Used for
 * node allocatable and Kueue quotas (lib/operands). Pure; __int128 (GCC, Clang). */
#ifndef GPUKMM_QUANTITY_H
#define GPUKMM_QUANTITY_H

#include <stdbool.h>
#include <stdint.h>

typedef __int128 gk_qty; /* nano-units */

#define GK_QTY_ONE ((gk_qty)1000000000)

/* Parse s (the API's syntax: sign, digits, fraction, then Ki..Ei, n u m k M G T P E,
 * or e/E and an integer exponent). false when s is not a quantity or is beyond
 * 10^20 units (no Kubernetes quantity comes near). */
bool gk_qty_parse(const char *s, gk_qty *out);
/* The value in whole units, rounded up (Quantity.Value()); saturates at INT64. */
int64_t gk_qty_value(gk_qty q);

#endif
