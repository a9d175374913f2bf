#!/usr/bin/env python3
"""Per-message accounting of smcr-perf's 64-byte ping-pong, per thread
(docs/design/readiness.md section 11; docs/PERFORMANCE.md "Wake-ups and system calls per
message").

usage: acct.py SMCR_PERF TRANSPORT HOG [--dev shm] [--env K=V]... [--wrap CMD] [--events E,...]

Starts `SMCR_PERF server --once` and `SMCR_PERF client 127.0.0.1 -t pingpong -s 64 -d 6`
(TRANSPORT smcr or tcp; HOG 1 adds one `while :; do :; done` for the run; --wrap runs
both under a command, e.g. smcr-run, with TRANSPORT tcp), and counts with `perf stat
--per-thread` over 2 s in the middle: the messages each thread sent (a uprobe on
tr_send_all, made here and removed at the end), its context switches, the wake-ups it
issued (sched:sched_wakeup fires in the waker), its system calls (by kind with
--events syscalls:sys_enter_NAME,...) and its CPU time. Every figure is printed per round
trip (= per message and side for a program thread). Needs root and perf with uprobes;
SMCR_PERF must have symbols (any build of tools/smcr-perf does)."""
import argparse
import collections
import json
import os
import random
import subprocess
import time

ap = argparse.ArgumentParser()
ap.add_argument('bin')
ap.add_argument('tr', choices=['smcr', 'tcp'])
ap.add_argument('hog', type=int)
ap.add_argument('--dev', default='shm')
ap.add_argument('--env', action='append', default=[])
ap.add_argument('--wrap', default='')
ap.add_argument('--events', default='context-switches,sched:sched_wakeup,'
                'raw_syscalls:sys_enter,task-clock')
a = ap.parse_args()

binp = os.path.abspath(a.bin)
probe = 'wf%d' % os.getpid()
subprocess.run(['perf', 'probe', '-q', '-x', binp, '-a', probe + '=tr_send_all'], check=True)
msgev = 'probe_' + os.path.basename(binp).split('.')[0].replace('-', '_')
# perf names the group after the binary; find it rather than guess
lst = subprocess.run(['perf', 'probe', '-l'], capture_output=True, text=True).stdout
for l in lst.split('\n'):
    if (':' + probe + ' ') in l:
        msgev = l.split()[0]
try:
    env = dict(os.environ, SMCR_DEVICES=a.dev)
    for kv in a.env:
        k, v = kv.split('=', 1)
        env[k] = v
    port = str(random.randint(20000, 40000))
    hog = subprocess.Popen(['sh', '-c', 'while :; do :; done']) if a.hog else None
    wrap = a.wrap.split() if a.wrap else []
    srv = subprocess.Popen(wrap + [binp, 'server', '-p', port, '--transport', a.tr, '--once'],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    cli = subprocess.Popen(wrap + [binp, 'client', '127.0.0.1', '-p', port, '-t', 'pingpong',
                                   '-s', '64', '-d', '6', '--transport', a.tr, '--json'],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(1.2)
    names = {}
    for role, p in (('srv', srv.pid), ('cli', cli.pid)):
        for t in os.listdir('/proc/%d/task' % p):
            try:
                names[int(t)] = role + ':' + open('/proc/%d/task/%s/comm' % (p, t)).read().strip()
            except OSError:
                pass
    evs = [msgev] + a.events.split(',')
    load = open('/proc/loadavg').read().split()[0]
    pr = subprocess.run(['perf', 'stat', '--per-thread', '-x,', '-e', ','.join(evs), '-p',
                         '%d,%d' % (srv.pid, cli.pid), '--', 'sleep', '2'],
                        capture_output=True, text=True)
    out, _ = cli.communicate()
    srv.wait()
    if hog:
        hog.kill()
        hog.wait()
finally:
    subprocess.run(['perf', 'probe', '-q', '-d', msgev], check=False)

cnt = collections.defaultdict(dict)
for l in pr.stderr.split('\n'):
    f = l.split(',')
    if len(f) < 4 or not f[1].replace('.', '').isdigit():
        continue
    cnt[int(f[0].rsplit('-', 1)[1])][f[3]] = float(f[1])
rt = sum(c.get(msgev, 0) for c in cnt.values()) / 2
median = mode = None
try:
    j = json.loads(out.decode().strip())
    j = j[0] if isinstance(j, list) else j
    stack = [j]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            median = o.get('median', median)
            mode = o.get('mode', mode)
            stack.extend(v for v in o.values() if isinstance(v, (dict, list)))
        elif isinstance(o, list):
            stack.extend(o)
except ValueError:
    pass
print('%s hog=%d dev=%s%s%s mode=%s median=%sus round_trips=%d load=%s' %
      (a.tr, a.hog, a.dev, ' ' + ' '.join(a.env) if a.env else '',
       ' wrap=' + a.wrap if a.wrap else '', mode, median, rt, load))
for tid in sorted(cnt):
    c = cnt[tid]
    if not rt or sum(c.get(e, 0) for e in evs[1:] if e != 'task-clock') < rt / 50:
        continue
    parts = ['msgs=%.2f' % (c.get(msgev, 0) / rt)]
    for e in evs[1:]:
        v = c.get(e, 0)
        k = e.split(':')[-1].replace('sys_enter_', '')
        if e == 'task-clock':
            parts.append('cpu_us=%.1f' % (v * 1e3 / rt))  # perf gives msec
        else:
            parts.append('%s=%.2f' % (k, v / rt))
    print('  %-24s %s' % (names.get(tid, '?') + '/' + str(tid), ' '.join(parts)))
