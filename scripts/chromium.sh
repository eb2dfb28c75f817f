#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the inspector's browser test
# (crates/server/tests/suite/browser/), from Debian's packages.
#   scripts/chromium.sh install   installs them when missing (idempotent; root or sudo)
#   scripts/chromium.sh check     exits 1, saying what to run, when either is missing
set -euo pipefail

have() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }

case "${1:-install}" in
install)
  if have; then
    echo "chromium and chromedriver present: $(chromedriver --version | head -1)"
    exit 0
  fi
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq || true
  $sudo apt-get install -y -qq chromium chromium-driver
  have
  echo "installed: $(chromedriver --version | head -1)"
  ;;
check)
  if have; then exit 0; fi
  echo "chromium or chromedriver missing: run scripts/chromium.sh install" >&2
  exit 1
  ;;
*)
  echo "usage: $0 install|check" >&2
  exit 2
  ;;
esac
