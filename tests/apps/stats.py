#!/usr/bin/env python3
"""tests/apps/stats.py: reads the SMCR_STATS file of one role of a real-program test (one JSON
line per process at its exit, docs/INTERPOSER.md) and checks the mode its connections ran in.

  stats.py FILE smcr MIN      at least MIN connections in SMC-R mode, none fell back
  stats.py FILE fallback MIN  at least MIN connections fell back to TCP (peer without SMC-R),
                              none in SMC-R mode
  stats.py FILE show          prints the totals

Connections that no rule sent to SMC-R (a program's own other sockets) are neither: they are
counted apart and never fail a check. Exit 0 when the check holds, 1 (with the reason) if not.
"""
import json
import sys

# The fallback reasons that mean "the peer does not run smcr" (docs/CONFIG.md: the server saw
# no CLC Proposal; the client's Proposal got no SMC answer).
PEER_REASONS = ("PEERNOSMC", "PEER_NO_SMC", "NOCLC", "CLNT_NOSMC", "NO_PROPOSAL")
# The reasons that mean "no rule asked for SMC-R here".
RULE_REASONS = ("RULE_TCP", "RULE_NONE", "NORULE", "NO_RULE", "BPF_NOT_INSTALLED", "RULE")


def totals(lines):
    t = {"procs": 0, "smcr": 0, "tcp": 0, "peer": 0, "rule": 0, "other": {},
         "bytes_smcr": 0, "bytes_tcp": 0, "programs": []}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        rec = json.loads(line)
        t["procs"] += 1
        t["programs"].append("%s[%s]" % (rec.get("program", "?"), rec.get("pid", "?")))
        conns = rec.get("connections", rec.get("conns", {}))
        modes = conns.get("by_mode", conns) if isinstance(conns, dict) else {}
        t["smcr"] += int(modes.get("smcr", 0))
        t["tcp"] += int(modes.get("tcp", 0))
        reasons = (conns.get("by_reason") if isinstance(conns, dict) else None) \
            or rec.get("fallback", rec.get("reasons", {})) or {}
        for side in ("local", "peer"):
            if isinstance(reasons.get(side), dict):   # {"local": {...}, "peer": {...}}
                reasons = dict(reasons, **reasons.pop(side))
        for name, n in reasons.items():
            if not isinstance(n, int):
                continue
            key = name.upper()
            if any(r in key for r in RULE_REASONS):
                t["rule"] += n
            elif any(r in key for r in PEER_REASONS):
                t["peer"] += n
            else:
                t["other"][name] = t["other"].get(name, 0) + n
        b = rec.get("bytes", {})
        t["bytes_smcr"] += int(b.get("smcr", rec.get("bytes_smcr", 0)) or 0)
        t["bytes_tcp"] += int(b.get("tcp", rec.get("bytes_tcp", 0)) or 0)
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
    except (ValueError, AttributeError, TypeError) as e:
        print("stats: %s: not the SMCR_STATS format: %s" % (path, e))
        return 1
    fell = t["tcp"] - t["rule"]  # TCP connections a rule had sent to SMC-R
    print("stats %s: %d process(es) %s; smcr %d, tcp %d (peer %d, rule %d, other %s), bytes smcr %d tcp %d"
          % (path.rsplit("/", 1)[-1], t["procs"], " ".join(t["programs"]), t["smcr"], t["tcp"],
             t["peer"], t["rule"], t["other"] or "-", t["bytes_smcr"], t["bytes_tcp"]))
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
