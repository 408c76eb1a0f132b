#!/bin/sh
# deploy/: the container, Kubernetes and Slurm recipes, checked with what
# Debian offers (no image is built and no cluster run here: see
# docs/DEPLOY.md for what stays untested):
# - Dockerfile: two stages on bookworm; every RUN passes shellcheck; every
#   package it installs exists in Debian; the runtime stage installs the
#   package of every shared library build/murmur links; a non-root USER, a
#   VOLUME for the data directory; the entry point passes shellcheck and
#   makes a key pair once.
# - Kubernetes: yamllint; a headless Service publishing not-ready pods, a
#   StatefulSet with a volume claim template, a readiness probe on murmur
#   status, a PodDisruptionBudget of shards.replication - 1; the pod
#   scripts pass shellcheck; every MURMUR_* variable names an agent option.
# - Slurm: the sbatch script passes shellcheck.
set -eu
NAME=deploy_recipes
build=${BUILD:-build}
bin="$build/murmur"
[ -x "$bin" ] || { echo "$NAME: $bin not built" >&2; exit 1; }
command -v shellcheck >/dev/null 2>&1 || { echo "skipped: $NAME: no shellcheck"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "$NAME: FAIL $*" >&2; exit 1; }
df=deploy/docker/Dockerfile

# ---- Dockerfile ----
[ "$(grep -c '^FROM debian:bookworm' "$df")" -eq 2 ] || fail "want two stages on debian:bookworm"
grep -q '^COPY --from=build ' "$df" || fail "the runtime stage copies nothing from the build"
user=$(sed -n 's/^USER //p' "$df")
[ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ] || fail "USER is '${user:-none}'"
grep -q '^VOLUME \["/var/lib/murmur"\]' "$df" || fail "no VOLUME for the data directory"
# each RUN (continuation lines joined) as a shell script
awk '/^RUN /{ on = 1; sub(/^RUN /, "") } on { if (sub(/\\$/, "")) { printf "%s", $0 } else { print; on = 0 } }' \
    "$df" >"$tmp/runs"
[ "$(wc -l <"$tmp/runs")" -ge 3 ] || fail "RUN instructions not found"
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    { echo '#!/bin/sh'; echo 'DEBIAN_FRONTEND=noninteractive FASHION=yes'; echo "$cmd"; } >"$tmp/run$n.sh"
    shellcheck -s sh -e SC2034 "$tmp/run$n.sh" || fail "RUN $n does not pass shellcheck"
done <"$tmp/runs"
# every package named exists in Debian
pkgs=$(sed 's/apt-get install -y --no-install-recommends/\n@/g' "$tmp/runs" | sed -n 's/^@//p' |
    sed 's/&&.*//; s/;.*//' | tr ' ' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | sort -u)
[ -n "$pkgs" ] || fail "no packages found in the RUN lines"
for p in $pkgs; do
    apt-cache show "$p" >/dev/null 2>&1 || fail "Debian has no package $p"
done
# the runtime stage installs every shared library the binary links (or a
# package that depends on it: libgfortran5 comes with libopenblas0-pthread)
# (library packages are lib*, but zlib's is zlib1g)
runtime=$(sed -n '/^FROM debian:bookworm-slim/,$p' "$df" | tr ' ' '\n' | grep -E '^(lib[a-z0-9.+-]+|zlib1g)$' | sort -u)
# shellcheck disable=SC2086
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances $runtime 2>/dev/null | sed -n 's/^\([a-z0-9][a-z0-9.+-]*\)$/\1/p' |
    sort -u >"$tmp/closure"
echo "$runtime" >>"$tmp/closure"
for lib in $(ldd "$bin" | awk '$3 ~ /^\// { print $3 }'); do
    pkg=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null || true)
    pkg=${pkg%%:*}
    case "$pkg" in libc6 | libgcc-s1 | '') continue ;; esac # in every Debian image
    grep -qx "$pkg" "$tmp/closure" || fail "the runtime stage does not install $pkg (for $lib)"
done
shellcheck -s sh deploy/docker/entrypoint.sh || fail "entrypoint.sh does not pass shellcheck"
mkdir -p "$tmp/bin"
ln -s "$(cd "$(dirname "$bin")" && pwd)/murmur" "$tmp/bin/murmur"
mkdir -p "$tmp/data"
"$bin" keygen --network-key "$tmp/net.key" >/dev/null
MURMUR_NODE_DATA_DIR="$tmp/data" MURMUR_NODE_LISTEN=0.0.0.0:7000 PATH="$tmp/bin:$PATH" \
    MURMUR_NODE_NETWORK_KEY_FILE="$tmp/net.key" sh deploy/docker/entrypoint.sh agent --print-config >"$tmp/cfg" || fail "entrypoint: agent --print-config"
[ -f "$tmp/data/murmur.key" ] || fail "the entry point made no key pair"
grep -q '^advertise = tcp://[0-9a-f.:]*:7000   # env MURMUR_NODE_ADVERTISE' "$tmp/cfg" ||
    { cat "$tmp/cfg"; fail "the entry point does not advertise this host's address"; }

# ---- Kubernetes ----
k8s=deploy/kubernetes/murmur.yaml
if command -v yamllint >/dev/null 2>&1; then
    yamllint -d '{extends: default, rules: {line-length: {max: 120}, document-start: disable,
        comments: {min-spaces-from-content: 1}}}' "$k8s" || fail "yamllint"
else
    echo "$NAME: no yamllint: YAML syntax not checked (apt-get install yamllint)"
fi
for want in 'kind: Service' 'clusterIP: None' 'publishNotReadyAddresses: true' 'kind: StatefulSet' \
    'serviceName: murmur' 'volumeClaimTemplates:' 'readinessProbe:' 'kind: PodDisruptionBudget' \
    'secretName: murmur-network-key' 'runAsNonRoot: true'; do
    grep -q "$want" "$k8s" || fail "$k8s lacks '$want'"
done
grep -q 'murmur status .*127.0.0.1:9100' "$k8s" || fail "readiness does not come from murmur status"
r=$(grep -A1 'name: MURMUR_SHARDS_REPLICATION' "$k8s" | sed -n 's/.*value: "\([0-9]*\)".*/\1/p' | sort -u)
[ "$(echo "$r" | wc -l)" -eq 1 ] || fail "MURMUR_SHARDS_REPLICATION differs between containers"
pdb=$(sed -n 's/^ *maxUnavailable: \([0-9]*\).*/\1/p' "$k8s")
[ "$pdb" -eq $((r - 1)) ] || fail "maxUnavailable $pdb is not shards.replication - 1 ($r - 1)"
reps=$(sed -n 's/^ *replicas: \([0-9]*\)/\1/p' "$k8s")
grep -A1 'name: REPLICAS' "$k8s" | grep -q "value: \"$reps\"" || fail "REPLICAS differs from replicas"
# the pod scripts (the '- |' blocks) pass shellcheck
awk '/- \|$/ { on = 1; ind = -1; n++; next }
     on { match($0, /^ */); if (ind < 0) ind = RLENGTH; if (RLENGTH < ind && $0 !~ /^ *$/) { on = 0; next }
          print substr($0, ind + 1) > ("'"$tmp"'/pod" n ".sh") }' "$k8s"
for f in "$tmp"/pod*.sh; do
    [ -f "$f" ] || fail "no pod script found"
    { echo '#!/bin/sh'; cat "$f"; } >"$f.sh"
    shellcheck -s sh -e SC2154 "$f.sh" || fail "pod script $(basename "$f") does not pass shellcheck"
done
# every MURMUR_SECTION_KEY variable is an agent option
for v in $(grep -ho 'MURMUR_[A-Z0-9_]*' "$k8s" deploy/docker/Dockerfile deploy/systemd/murmur@.service | sort -u); do
    env "$v=" "$bin" agent --print-config >/dev/null 2>"$tmp/err" ||
        grep -q "must not be empty\|is not one of\|not a whole" "$tmp/err" ||
        { cat "$tmp/err"; fail "$v is not an agent option"; }
done

# ---- Slurm ----
shellcheck -s sh deploy/slurm/murmur.sbatch || fail "murmur.sbatch does not pass shellcheck"
grep -q '^srun ' deploy/slurm/murmur.sbatch || fail "the sbatch script does not use srun"
echo "$NAME: ok"
