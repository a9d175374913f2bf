#!/usr/bin/env bash
# deps.sh [test]: installs, with apt-get, the Debian 12 packages smcr needs and that are
# missing. "test" adds what only the test suite uses. Safe to run again: it installs only
# what dpkg does not already list as installed.
set -euo pipefail
# clang, libbpf-dev, bpftool, linux-libc-dev: the BPF programs (clang -target bpf), their
# skeleton and the smcr-bpf installer (src/bpf, tools/smcr-bpf).
# python3: scripts/check-refs.sh (run by the build) and scripts/fix-refs.py.
pkgs=(build-essential cmake pkg-config libcmocka-dev libpcap-dev
      clang libbpf-dev bpftool linux-libc-dev python3)
if [ "${1:-}" = test ]; then
  # clang + compiler-rt: libFuzzer and sanitizers; tshark: the independent decoder;
  # iproute2: network namespaces for the emulated provider's tests.
  # nftables: the bpf tests drop SYN-ACKs in their own network namespaces.
  # libssl-dev: SHA-256 (libcrypto) in the socket layer's integration tests only.
  pkgs+=(clang libclang-rt-14-dev tshark iproute2 procps nftables libssl-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
