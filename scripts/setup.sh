#!/usr/bin/env bash
# Sets up what the demo or the test suite needs, on a fresh Debian machine or an existing
# checkout, and does nothing that is already done.
#
#   scripts/setup.sh demo   a Python 3.11 virtualenv in .venv with the project (`make demo`)
#   scripts/setup.sh        the same, plus what the tests use (`make test`): Debian packages
#                           (as root, through apt-get) and Helm, built with `go install`
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
case "$mode" in
  demo | all) ;;
  *)
    echo "setup: error: unknown mode '$mode' (demo, or nothing for everything)" >&2
    exit 2
    ;;
esac

# Debian packages the tests and benchmarks use (servers and tools started by the test fixtures;
# chromium loads the xApp's dashboard in a test, driven by Playwright). The demo runs on
# loopback with dry-run agents and no Redis: it needs none of them.
SYSTEM_PACKAGES=(redis-server iperf3 iproute2 mptcpize chromium)

# A C compiler for the C cores (the fast E2 reader's kpm/_fast_message.c, the policy's
# xapp/policy/_robust_core.c, the samples' xapp/_samples.c, the silence tracker's
# xapp/estimators/_silence.c, fusion's xapp/estimators/_fusion_core.c): the tests compare each with
# its pure-Python twin. The demo does without (the twin reads, about twice as slowly) unless a
# compiler is there anyway.
BUILD_PACKAGES=(gcc libc6-dev)

missing=()
if [ "$mode" = all ]; then
  for pkg in "${BUILD_PACKAGES[@]}" "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # The packages start services we do not want: tests start their own servers.
    systemctl disable --now redis-server >/dev/null 2>&1 || service redis-server stop >/dev/null 2>&1 || true
  else
    echo "setup: warning: not root, cannot install ${missing[*]}; tests that need them will skip" >&2
  fi
fi

python=""
for candidate in python3.11 python3; do
  if command -v "$candidate" >/dev/null &&
    "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then
  echo "setup: error: Python 3.11 is needed (python3.11 or python3 on PATH)" >&2
  exit 1
fi

# The core also needs the interpreter's headers (Debian's own Python keeps them apart).
if [ "$mode" = all ] && ! "$python" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing python3.11-dev (headers for the E2 reader's C core)"
    apt-get install -y -qq --no-install-recommends python3.11-dev >/dev/null ||
      echo "setup: warning: no python3.11-dev; the E2 reader's pure-Python twin will read" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $python"
  "$python" -m venv .venv
fi
# Installed again when the dependencies or a C core change (the cores are built at install).
stamp=.venv/.installed-$(sha256sum pyproject.toml setup.py kpm/_fast_message.c xapp/policy/_robust_core.c xapp/_samples.c xapp/estimators/_silence.c xapp/estimators/_fusion_core.c models/_tree_core.c | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "setup: installing the project and its dependencies into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[xapp,dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
if [ "$mode" = demo ]; then
  echo "setup: ready for the demo (.venv/bin/atsss)"
  exit 0
fi
# Helm, for the chart's tests, built from its Go module (the registries reach no binary release).
HELM_VERSION=v3.16.4
if ! command -v helm >/dev/null && [ ! -x "$(go env GOPATH 2>/dev/null)/bin/helm" ]; then
  if command -v go >/dev/null; then
    echo "setup: building helm $HELM_VERSION with go install (a few minutes, once)"
    GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  else
    echo "setup: warning: no go toolchain, cannot install helm; the chart tests will fail" >&2
  fi
fi
echo "setup: ready (.venv/bin/atsss)"
