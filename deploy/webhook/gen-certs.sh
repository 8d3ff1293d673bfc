#!/bin/bash
# A serving certificate of your own for gpukmm-webhook (neither gpukmm-certd's,
# the default, nor cert-manager's): makes a private CA and a certificate for the
# webhook Service with openssl, replaces the Secret gpukmm-webhook-cert with a TLS
# Secret holding it (without certd's gpukmm.io/managed-by annotation: certd then
# serves it on every replica but never rotates it, nor touches the caBundle) and
# patches the CA into both webhook configurations. Re-run it to rotate (the webhook
# picks the new pair up without a restart). To hand the certificate back to certd:
# kubectl apply -k deploy/default after deleting the Secret.
#
# usage: deploy/webhook/gen-certs.sh [--namespace NS] [--service NAME] [--secret NAME]
#                                    [--days N] [--out-dir DIR]
#   --out-dir DIR  only write ca.crt, tls.crt, tls.key into DIR (no kubectl)
set -euo pipefail
NS=intel-gpu-base-operator
SVC=gpukmm-webhook-service
SECRET=gpukmm-webhook-cert
DAYS=365
OUT=
while [ $# -gt 0 ]; do
	case $1 in
	--namespace) NS=$2; shift 2 ;;
	--service) SVC=$2; shift 2 ;;
	--secret) SECRET=$2; shift 2 ;;
	--days) DAYS=$2; shift 2 ;;
	--out-dir) OUT=$2; shift 2 ;;
	-h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "gen-certs.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
command -v openssl >/dev/null || { echo "gen-certs.sh: openssl is required" >&2; exit 2; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$DAYS" \
	-keyout "$DIR/ca.key" -out "$DIR/ca.crt" -subj "/CN=gpukmm-webhook-ca" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	-keyout "$DIR/tls.key" -out "$DIR/tls.csr" -subj "/CN=$SVC.$NS.svc" 2>/dev/null
cat >"$DIR/ext" <<X
basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:$SVC.$NS.svc,DNS:$SVC.$NS.svc.cluster.local
X
openssl x509 -req -in "$DIR/tls.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" -CAcreateserial \
	-days "$DAYS" -out "$DIR/tls.crt" -extfile "$DIR/ext" 2>/dev/null
if [ -n "$OUT" ]; then
	mkdir -p "$OUT"
	cp "$DIR/ca.crt" "$DIR/tls.crt" "$DIR/tls.key" "$OUT/"
	echo "wrote $OUT/ca.crt $OUT/tls.crt $OUT/tls.key"
	exit 0
fi
command -v kubectl >/dev/null || { echo "gen-certs.sh: kubectl is required (or use --out-dir)" >&2; exit 2; }
# a Secret's type cannot change: certd's shipped one (Opaque) goes first
if [ "$(kubectl -n "$NS" get secret "$SECRET" -o jsonpath='{.type}' 2>/dev/null)" = Opaque ]; then
	kubectl -n "$NS" delete secret "$SECRET"
fi
kubectl -n "$NS" create secret tls "$SECRET" --cert="$DIR/tls.crt" --key="$DIR/tls.key" \
	--dry-run=client -o yaml | kubectl apply -f -
CA=$(base64 -w0 <"$DIR/ca.crt")
kubectl patch mutatingwebhookconfiguration gpukmm-mutating-webhook-configuration --type=json \
	-p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$CA\"}]"
kubectl patch validatingwebhookconfiguration gpukmm-validating-webhook-configuration --type=json \
	-p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$CA\"}]"
echo "Secret $NS/$SECRET written; caBundle patched into both webhook configurations."
