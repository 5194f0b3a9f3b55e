#!/usr/bin/env bash
# Install everything incident-bot needs on a fresh Debian machine with only Python.
#   bash scripts/setup.sh         runtime (the demo)
#   bash scripts/setup.sh --dev   runtime + test tools
# torch==2.13.0 goes first: it is the CPU build on this disk, and with it installed the
# project's torch range resolves to it instead of pulling a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(redis-server openssh-server openssh-client prometheus-alertmanager prometheus lsof psmisc procps sudo
              slurmctld slurmd slurm-client munge haproxy)

need_apt=()
for bin in redis-server:redis-server sshd:openssh-server ssh:openssh-client \
           prometheus-alertmanager:prometheus-alertmanager promtool:prometheus lsof:lsof sudo:sudo \
           slurmctld:slurmctld slurmd:slurmd scontrol:slurm-client munged:munge haproxy:haproxy; do
    cmd=${bin%%:*}; pkg=${bin##*:}
    if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ] && [ ! -x "/usr/bin/$cmd" ]; then
        need_apt+=("$pkg")
    fi
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}"
fi
# haproxy: only `haproxy -c` on deploy/compose/haproxy.cfg (tests/integration/test_compose.py).
# Debian's redis-server, sshd, munge and slurm packages start system services; the bot and its
# tests never use them (tests/fixtures/slurm.py starts a private one-node cluster on loopback).

python3 -m pip install -q torch==2.13.0
if [ "${1:-}" = "--dev" ]; then
    python3 -m pip install -q -e '.[dev]'
else
    python3 -m pip install -q -e .
fi
echo "setup: done ($(python3 -c 'import torch; print("torch", torch.__version__)'))"
