#!/usr/bin/env bash
# deps.sh [test]: installs, with apt-get, the Debian 12 packages smcr needs and that are
# missing. "test" adds what only the test suite uses. Safe to run again: it installs only
# what dpkg does not already list as installed.
set -euo pipefail
# clang, libbpf-dev, bpftool, linux-libc-dev: the BPF programs (clang -target bpf), their
# skeleton and the smcr-bpf installer (src/bpf, tools/smcr-bpf).
# libibverbs-dev: the verbs provider's headers (src/dev/verbs; libibverbs is dlopen()ed).
pkgs=(build-essential cmake pkg-config libcmocka-dev libpcap-dev
      clang libbpf-dev bpftool linux-libc-dev libibverbs-dev)
if [ "${1:-}" = test ]; then
  # clang + compiler-rt: libFuzzer and sanitizers; tshark: the independent decoder;
  # iproute2: network namespaces for the emulated provider's tests.
  # nftables: the bpf tests drop SYN-ACKs in their own network namespaces.
  # libssl-dev: SHA-256 (libcrypto) in the socket layer's integration tests only.
  pkgs+=(clang libclang-rt-14-dev tshark iproute2 procps nftables libssl-dev)
  # man-db, groff-base: the man pages' test; dpkg-dev, fakeroot, lintian: the .deb's;
  # python3: smcr-stat's test reads its JSON.
  pkgs+=(man-db groff-base dpkg-dev fakeroot lintian python3)
  # qemu-system-x86, debootstrap: the verbs provider's Soft-RoCE guests (tests/vm).
  pkgs+=(qemu-system-x86 debootstrap)
  # tests/apps and bench/apps: real programs under smcr-run (docs/INTERPOSER.md "Proven programs")
  pkgs+=(redis-server redis-tools nginx-light curl wrk iperf3 sockperf memcached libmemcached-tools
         socat ncat python3 libpython3.11-testsuite)
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
