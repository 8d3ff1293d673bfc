/* lib/operands: the device plugin DaemonSet (operands.md §5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The pod template, as upstream's (the template's `-health-management` arg never
 * reaches a pod: the args are generated). */
static const char DP_DS[] =
	"metadata:\n"
	"  labels: {app: intel-gpu-plugin}\n"
	"spec:\n"
	"  selector:\n"
	"    matchLabels: {app: intel-gpu-plugin}\n"
	"  updateStrategy:\n"
	"    type: RollingUpdate\n"
	"    rollingUpdate: {maxSurge: 0, maxUnavailable: 1}\n"
	"  template:\n"
	"    metadata:\n"
	"      labels: {app: intel-gpu-plugin}\n"
	"    spec:\n"
	"      automountServiceAccountToken: false\n"
	"      containers:\n"
	"      - name: intel-gpu-plugin\n"
	"        image: ''\n"
	"        imagePullPolicy: IfNotPresent\n"
	"        env:\n"
	"        - name: NODE_NAME\n"
	"          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}\n"
	"        - name: HOST_IP\n"
	"          valueFrom: {fieldRef: {fieldPath: status.hostIP}}\n"
	"        resources:\n"
	"          requests: {cpu: 40m, memory: 45Mi}\n"
	"          limits: {cpu: 100m, memory: 90Mi}\n"
	"        securityContext:\n"
	"          allowPrivilegeEscalation: false\n"
	"          capabilities: {drop: [ALL]}\n"
	"          readOnlyRootFilesystem: true\n"
	"          seLinuxOptions: {type: container_device_plugin_t}\n"
	"          seccompProfile: {type: RuntimeDefault}\n"
	"        volumeMounts:\n"
	"        - {name: devfs, mountPath: /dev/dri, readOnly: true}\n"
	"        - {name: sysfsdrm, mountPath: /sys/class/drm, readOnly: true}\n"
	"        - {name: kubeletsockets, mountPath: /var/lib/kubelet/device-plugins}\n"
	"        - {name: cdipath, mountPath: /var/run/cdi}\n"
	"      volumes:\n"
	"      - {name: devfs, hostPath: {path: /dev/dri}}\n"
	"      - {name: sysfsdrm, hostPath: {path: /sys/class/drm}}\n"
	"      - {name: kubeletsockets, hostPath: {path: /var/lib/kubelet/device-plugins}}\n"
	"      - {name: cdipath, hostPath: {path: /var/run/cdi, type: DirectoryOrCreate}}\n";

#define XPUMD_VOL "{name: runxpumd, hostPath: {path: /run/xpumd, type: DirectoryOrCreate}}"
#define XPUMD_MOUNT "{name: runxpumd, mountPath: /run/xpumd}"

/* "0x" prefixed when missing, comma-joined */
static cJSON *hex_ids(gk_opr *r, const char *flag, char **ids, size_t n)
{
	size_t len = strlen(flag) + 1;
	for (size_t i = 0; i < n; i++)
		len += strlen(ids[i]) + 3;
	char *b = malloc(len);
	if (!b) {
		r->oom = true;
		return NULL;
	}
	size_t o = (size_t)snprintf(b, len, "%s", flag);
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(b + o, len - o, "%s%s%s", i ? "," : "", strncmp(ids[i], "0x", 2) ? "0x" : "", ids[i]);
	cJSON *v = gk_opr_str(r, b);
	free(b);
	return v;
}

static cJSON *dp_args(gk_opr *r)
{
	const Gpukmm__ClusterPolicySpec *s = r->spec;
	const Gpukmm__DevicePluginSpec *d = s->dp;
	cJSON *a = cJSON_CreateArray();
	if (!a) {
		r->oom = true;
		return NULL;
	}
	if (s->has_resource_monitoring && s->resource_monitoring) {
		gk_opr_push(r, a, gk_opr_str(r, "-enable-monitoring"));
		gk_opr_push(r, a, gk_opr_str(r, "-xpumd-endpoint=/run/xpumd/intelxpuinfo.sock"));
	}
	int32_t lvl = gk_opr_level(s, d ? d->log_level : 0, d && d->has_log_level);
	if (lvl > 0)
		gk_opr_push(r, a, gk_opr_strf(r, "-v=%d", lvl));
	if (d && d->by_path_mode && *d->by_path_mode)
		gk_opr_push(r, a, gk_opr_strf(r, "-bypath=%s", d->by_path_mode));
	if (d && d->n_allow_ids)
		gk_opr_push(r, a, hex_ids(r, "-allow-ids=", d->allow_ids, d->n_allow_ids));
	if (d && d->n_deny_ids)
		gk_opr_push(r, a, hex_ids(r, "-deny-ids=", d->deny_ids, d->n_deny_ids));
	return a;
}

void gk_opr_dp(gk_opr *r)
{
	const Gpukmm__ClusterPolicySpec *s = r->spec;
	char *name = gk_opr_name(r, "-device-plugin");
	char *sa = gk_opr_name(r, "-gpu-dp-sa");
	if (r->o->openshift)
		gk_opr_openshift(r, GK_OP_DP, "gpu-dp", true, sa);
	gk_op_obj *o = gk_opr_add(r, GK_OP_DP, "apps/v1", "DaemonSet", "daemonsets", r->ns, name, DP_DS);
	free(name);
	if (!o) {
		free(sa);
		return;
	}
	gk_opr_set_str(r, o->obj, "/metadata/labels/owner", r->cpn);
	gk_opr_rule(r, o, GK_OP_SUBSET, "/metadata/labels/owner");
	gk_opr_set_str(r, o->obj, "/spec/template/spec/containers/0/image", s->dp && s->dp->plugin ? s->dp->plugin : "");
	gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/0/image");
	cJSON *args = dp_args(r);
	if (cJSON_GetArraySize(args)) {
		gk_opr_set(r, o->obj, "/spec/template/spec/containers/0/args", args);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/0/args");
	} else {
		cJSON_Delete(args);
		gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/containers/0/args");
	}
	gk_opr_pod_common(r, o);
	if (s->has_resource_monitoring && s->resource_monitoring) {
		gk_opr_set(r, o->obj, "/spec/template/spec/volumes/@runxpumd", gk_opr_template(r, XPUMD_VOL));
		gk_opr_set(r, o->obj, "/spec/template/spec/containers/0/volumeMounts/@runxpumd",
			   gk_opr_template(r, XPUMD_MOUNT));
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/volumes/@runxpumd");
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/containers/0/volumeMounts/@runxpumd");
	} else {
		gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/volumes/@runxpumd");
		gk_opr_rule(r, o, GK_OP_ABSENT, "/spec/template/spec/containers/0/volumeMounts/@runxpumd");
	}
	if (r->o->openshift) {
		gk_opr_set_str(r, o->obj, "/spec/template/spec/serviceAccountName", sa);
		gk_opr_rule(r, o, GK_OP_SUBSET, "/spec/template/spec/serviceAccountName");
	}
	free(sa);
}
