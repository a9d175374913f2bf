#!/usr/bin/env python3
"""tests/apps/stats.py: reads the SMCR_STATS file of one role of a real-program test (one JSON
line per process at its exit, docs/INTERPOSER.md) and checks the mode its connections ran in.

  stats.py FILE smcr MIN      at least MIN connections in SMC-R mode, none fell back
  stats.py FILE fallback MIN  at least MIN connections fell back to TCP (peer without SMC-R),
                              none in SMC-R mode
  stats.py FILE smcr-some MIN at least MIN connections in SMC-R mode (a test suite: others listed)
  stats.py FILE tcp MIN       at least MIN connections in TCP mode by any reason, none in SMC-R
  stats.py FILE show          prints the totals

Connections that no rule sent to SMC-R (a program's own other sockets) are neither: they are
counted apart and never fail a check. Exit 0 when the check holds, 1 (with the reason) if not.
"""
import json
import os
import sys

# The fallback reasons that mean "the peer does not run smcr" (docs/CONFIG.md: the server saw
# no CLC Proposal; the client's Proposal got no SMC answer).
PEER_REASONS = ("PEERNOSMC",)
# The reasons that mean "no rule asked for SMC-R here".
RULE_REASONS = ("RULE_TCP", "BPF_NOT_INSTALLED")


def totals(lines):
    """Sums the lines (docs/CONFIG.md "SMCR_STATS": conns, fallback_local, fallback_peer,
    handshake_errors, bytes_smcr, bytes_tcp)."""
    t = {"procs": 0, "smcr": 0, "tcp": 0, "failed": 0, "peer": 0, "rule": 0, "other": {},
         "errors": {}, "bytes_smcr": 0, "bytes_tcp": 0, "programs": []}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        rec = json.loads(line)
        t["procs"] += 1
        t["programs"].append("%s[%s]%s" % (rec["program"], rec["pid"],
                                          "" if rec.get("event") == "exit" else "(%s)" % rec.get("event")))
        c = rec["conns"]
        t["smcr"] += c["smcr"]
        t["tcp"] += c["tcp"]
        t["failed"] += c["failed"]
        # fallback_local: this side's reason for each tcp connection (fallback_peer is the
        # peer's Decline of some of the same connections: not counted twice)
        for name, n in rec["fallback_local"].items():
            if name in RULE_REASONS:
                t["rule"] += n
            elif name in PEER_REASONS:
                t["peer"] += n
            else:
                t["other"][name] = t["other"].get(name, 0) + n
        for name, n in rec["fallback_peer"].items():
            t["other"]["peer:" + name] = t["other"].get("peer:" + name, 0) + n
        for name, n in rec["handshake_errors"].items():
            t["errors"][name] = t["errors"].get(name, 0) + n
        t["bytes_smcr"] += rec["bytes_smcr"]["sent"] + rec["bytes_smcr"]["received"]
        t["bytes_tcp"] += rec["bytes_tcp"]["sent"] + rec["bytes_tcp"]["received"]
    return t


def main():
    path, what = sys.argv[1], sys.argv[2]
    want = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        print("stats: %s: %s (no process of this role wrote SMCR_STATS)" % (path, e))
        return 1
    try:
        t = totals(lines)
    except (ValueError, KeyError, AttributeError, TypeError) as e:
        print("stats: %s: not the SMCR_STATS format: %s" % (path, e))
        return 1
    fell = t["tcp"] - t["rule"]  # TCP connections a rule had sent to SMC-R
    print("stats %s: %d process(es) %s; smcr %d, tcp %d (peer %d, rule %d, other %s), failed %d %s, bytes smcr %d tcp %d"
          % (path.rsplit("/", 1)[-1], t["procs"], " ".join(t["programs"]), t["smcr"], t["tcp"],
             t["peer"], t["rule"], t["other"] or "-", t["failed"], t["errors"] or "",
             t["bytes_smcr"], t["bytes_tcp"]))
    # a peer that closed before sending a byte (wrk's last connections) is not a failure;
    # STATS_ALLOW adds error names a test expects (wrk closing its last connects: ECONNABORTED)
    for name in ["CORE_TCP_EOF"] + os.environ.get("STATS_ALLOW", "").split():
        t["failed"] -= t["errors"].pop(name, 0)
    if what not in ("show", "smcr-some") and t["failed"]:
        print("stats: %d connection(s) failed their handshake: %s" % (t["failed"], t["errors"]))
        return 1
    if what == "show":
        return 0
    if what == "smcr":
        if t["smcr"] < want:
            print("stats: want at least %d SMC-R connection(s), got %d" % (want, t["smcr"]))
            return 1
        if fell > 0:
            print("stats: %d connection(s) fell back to TCP: %s" % (fell, t["other"] or "peer"))
            return 1
        if t["bytes_smcr"] == 0:
            print("stats: no byte moved over SMC-R")
            return 1
        return 0
    if what == "smcr-some":  # a suite: at least MIN in SMC-R mode; fallbacks and failures listed
        return 0 if t["smcr"] >= want else 1
    if what == "tcp":  # TCP by a decline (e.g. exec of a connection never used): none in SMC-R mode
        if t["smcr"] != 0 or t["tcp"] < want:
            print("stats: want %d+ TCP connection(s) and none in SMC-R mode" % want)
            return 1
        return 0
    if what == "fallback":
        if t["smcr"] != 0:
            print("stats: %d connection(s) in SMC-R mode, want none" % t["smcr"])
            return 1
        if t["peer"] < want:
            print("stats: want at least %d fallback(s) for a peer without SMC-R, got %d (other %s)"
                  % (want, t["peer"], t["other"] or "-"))
            return 1
        return 0
    print("stats: unknown check %s" % what)
    return 2


if __name__ == "__main__":
    sys.exit(main())
