#!/usr/bin/env bash
# demo.sh: the README's first command (for now): installs what is missing (scripts/deps.sh),
# builds smcr-decode in build/release and decodes the hex examples of the protocol reference
# (tests/vectors/spec/, copied from wire-formats.md 1, 3.6, 4 and 9) with it: a CLC handshake,
# LLC link and rkey management, CDC messages, and a malformed message. Takes seconds.
# Later issues replace it with the SMC-R vs TCP benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DSMCR_TESTS=OFF >/dev/null
cmake --build build/release -j"$jobs" --target smcr-decode >/dev/null
dec=build/release/tools/smcr-decode/smcr-decode
v=tests/vectors/spec

show() { # title file...
	local title=$1
	shift
	printf '\n=== %s\n' "$title"
	for f in "$@"; do
		printf -- '--- %s\n' "$f"
		"$dec" -f "$f"
	done
}

cat <<'EOF'
smcr demo: smcr-decode, the SMC-R v1 message decoder (RFC 7609)

SMC-R keeps TCP's socket semantics but moves the data with RDMA. A TCP connection opens
first (SYN/SYN-ACK carry TCP option 254 with ExID "SMCR"), then CLC messages inside that
TCP stream negotiate SMC-R (Proposal, Accept, Confirm, or Decline -> plain TCP). The peers
then manage RDMA links with 44-byte LLC messages and announce data written into each
other's ring buffers with 44-byte CDC messages.

Below, smcr-decode prints the fields of real and reference messages (the protocol
reference's hex examples); every field name is the spec's, in snake_case.
EOF

show "TCP option, as Linux puts it in SYN and SYN-ACK" "$v/tcp_option_aligned.hex"
show "CLC handshake: a Proposal (smcr's form) and a real Accept captured from Linux" \
	"$v/proposal_smcr_n40.hex" "$v/accept_linux.hex"
show "CLC Decline: why SMC-R was refused (here: the peers are not in the same subnet)" \
	"$v/decline_diffprefix.hex"
show "LLC: confirming link 1, adding link 2, announcing an RMB's rkeys, deleting a link" \
	"$v/llc_confirm_link_req.hex" "$v/llc_add_link_req.hex" \
	"$v/llc_confirm_rkey_req.hex" "$v/llc_delete_link_req.hex"
show "CDC: first data announced, a wrapped producer cursor with write-blocked, close" \
	"$v/cdc_first_data.hex" "$v/cdc_wrapped_blocked.hex" "$v/cdc_close.hex"

printf '\n=== The same Accept as one JSON line (--json)\n'
"$dec" --json -f "$v/accept_linux.hex"

printf '\n=== A malformed message: an Accept whose QP MTU code is 0 (exit status 2)\n'
set +e
"$dec" -f tests/vectors/malformed/clc_accept_mtu0.hex
echo "exit status: $?"
set -e

cat <<EOF

More: $dec --help (hex in arguments or on stdin, pcap/pcapng with -r).
EOF
