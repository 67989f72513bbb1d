#!/usr/bin/env python3
"""Writes keys.txt: the 2000 keys every golden map is built from (deterministic, URL-safe).

A mix of short counters, memcached-style keys and pseudo-random strings of 1 to 24 characters.
"""
import os
import random

rng = random.Random(20261130)
alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
keys = ['k%d' % i for i in range(500)]
keys += ['user:%d:profile' % (i * 7919) for i in range(500)]
keys += ['session-%08x' % rng.getrandbits(32) for _ in range(500)]
seen = set(keys)
while len(keys) < 2000:
    key = ''.join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
    if key not in seen:
        seen.add(key)
        keys.append(key)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'keys.txt'), 'w') as f:
    f.write('\n'.join(keys) + '\n')
