#!/usr/bin/env python3
"""Differential test: random, well-formed sessions run through the chring tool and through the
independent reference model (ref_exercise.py); every answer must agree.  Seeds are fixed, so a
failure reproduces; the failing session is written to a file for replay.

    differential.py <chring-binary> [sessions-per-profile]
"""
import os
import random
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_exercise  # noqa: E402

PROFILES = ['hash64', 'murmur32', 'fnv32', 'fnv16', 'xxh3', 'ketama', 'nginx']
NAMES = ['a', 'b', 'c', 'd', 'e', 'node-10', '10.0.0.1:11211', 'unix:/s', 'x\u00fc']


def session(rng, profile):
    vnodes = rng.choice([1, 2, 3, 8, 16]) if profile not in ('ketama', 'nginx') else 160
    balance = rng.choice([1, 1.25, 2])
    lines = ['# args: --profile %s --vnodes %d --balance %s' % (profile, vnodes, balance)]
    members = []
    held = []
    next_lease = 0
    snapped = False
    for _ in range(rng.randint(40, 120)):
        op = rng.random()
        key = rng.choice(['k%d' % rng.randrange(50), '', 'key with spaces', 'user:%d' %
                          rng.randrange(1000)])
        if op < 0.08:
            names = rng.sample(NAMES, rng.randint(0, 5))
            lines.append('POOL ' + ' '.join(names))
            members = list(dict.fromkeys(names))
        elif op < 0.18:
            names = [rng.choice(NAMES) for _ in range(rng.randint(1, 3))]
            lines.append('ADD ' + ' '.join(names))
            members += [n for n in dict.fromkeys(names) if n not in members]
        elif op < 0.25:
            names = [rng.choice(NAMES) for _ in range(rng.randint(1, 2))]
            lines.append('REMOVE ' + ' '.join(names))
            members = [n for n in members if n not in names]
        elif op < 0.38:
            lines.append('LOOKUP ' + key)
        elif op < 0.42:
            lines.append('HASH ' + key)
        elif op < 0.45:
            lines.append('RING')
        elif op < 0.50:
            lines.append('DIST')
        elif op < 0.54:
            lines.append('SNAP %d' % rng.randint(0, 300))
            snapped = True
        elif op < 0.60 and snapped:
            lines.append('MOVED')
        elif op < 0.65 and members:
            lines.append('WEIGHT %s %d' % (rng.choice(members), rng.randint(1, 4)))
        elif op < 0.70 and members:
            lines.append('LOAD %s %d' % (rng.choice(members), rng.randint(0, 9)))
        elif op < 0.76:
            lines.append('BOUNDED ' + key)
        elif op < 0.80:
            lines.append('REPLICAS %s %d' % (key, rng.randint(1, 6)))
        elif op < 0.84:
            lines.append('ACQUIRE ' + key)
            if members:
                next_lease += 1
                held.append(next_lease)
        elif op < 0.88:
            # Members, names not in the pool and repeats; sometimes every member.
            skip = [rng.choice(NAMES) for _ in range(rng.randint(0, 3))]
            if members and rng.random() < 0.15:
                skip = list(members)
            lines.append('RETRY %d %s' % (len(skip), ''.join(n + ' ' for n in skip)) + key)
            if any(n not in skip for n in members):
                next_lease += 1
                held.append(next_lease)
        elif op < 0.94 and held:
            lines.append('RELEASE %d' % held.pop(rng.randrange(len(held))))
        elif op < 0.97:
            lines.append('STATS')
        else:
            lines.append('VERSION')
    return '\n'.join(lines) + '\n'


def main():
    tool = sys.argv[1]
    per_profile = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    failures = 0
    runs = 0
    for profile in PROFILES:
        for seed in range(per_profile):
            rng = random.Random('%s-%d' % (profile, seed))
            text = session(rng, profile).encode()
            with tempfile.NamedTemporaryFile('wb', suffix='.in', delete=False) as f:
                f.write(text)
                path = f.name
            try:
                want = ref_exercise.run_session(path)
                args = text.split(b'\n', 1)[0].decode().split()[2:]
                got = subprocess.run([tool] + args, input=text, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, timeout=60)
            except AssertionError as e:
                # The model's own checks (keys move only to a joiner, only from a leaver).
                print('FAIL %s seed %d: model check: %s (session %s)' % (profile, seed, e, path))
                failures += 1
                continue
            runs += 1
            if got.returncode != 0 or got.stderr or got.stdout != want:
                failures += 1
                wl, gl = want.split(b'\n'), got.stdout.split(b'\n')
                first = next((i for i in range(max(len(wl), len(gl)))
                              if i >= len(wl) or i >= len(gl) or wl[i] != gl[i]), None)
                print('FAIL %s seed %d: exit %d, stderr %r, first differing answer line %s: '
                      'model %r, tool %r (session kept in %s)' % (
                          profile, seed, got.returncode, got.stderr[:200], first,
                          wl[first] if first is not None and first < len(wl) else None,
                          gl[first] if first is not None and first < len(gl) else None, path))
            else:
                os.unlink(path)
    print('%d sessions agree with the model, %d failed' % (runs - failures, failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
