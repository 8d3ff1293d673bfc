# A service's metrics as its latest heartbeat carried them (Control.List of the
# supervisor, or of tests/bin/fake_control), flattened for jq checks:
#   ctl_metrics CONTROL_URL PID   {"name": value, ...} of the process PID
# Keys: the family name without the gpukmm_ prefix, both with and without a
# _total suffix (gpukmm_statusd_reports_total -> statusd_reports_total and
# statusd_reports); a labelled family's samples are summed, a histogram counts
# its observations; each labelled sample is also there as NAME{v1,v2} (its
# label values in order: watcher_cache_objects{node}). METRICS_FLAT is the jq function (`flat`) doing that to a
# .metrics array, for scripts that read Control.List themselves.
METRICS_FLAT='def sv: if .bucket_counts then ([.bucket_counts[] | tonumber] | add) else ((.value // 0) | tonumber) end;
	def flat: [.[]? | (.name | sub("^gpukmm_"; "")) as $n | ([.samples[]? | sv] | add // 0) as $v
	| {($n): $v}, {($n | sub("_total$"; "")): $v},
	  (.samples[]? | select(.label_values) | {($n + "{" + (.label_values | join(",")) + "}"): sv})] | add // {};'
ctl_metrics() { # CONTROL_URL PID
	"$GPUKMM_BIN/gpukmmctl" ipc call "$1" gpukmm.Control.List '{}' --timeout-ms 2000 2>/dev/null |
		jq -c --argjson pid "$2" "$METRICS_FLAT"' [.services[]? | select(.pid == $pid) | .metrics | flat] | add // {}'
}
