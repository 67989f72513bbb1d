#!/usr/bin/env python3
"""An independent reference model of the `chring` tool's command protocol, written from the
command-protocol exercise (MurmurHash3 x86 32-bit, seed 0, labels "<name>#<i>", ties ordered by
name) and from docs/design.md §1-§3 and §7 for the other profiles.  It shares no code with chring:
it is used to derive the expected output of the scripted sessions rather than copying whatever the
tool printed.

    ref_exercise.py SESSION.in          print the model's answers for a session
    ref_exercise.py --write             (re)write tests/cli/<s>.out for every modelled session
    ref_exercise.py --check             compare the committed .out files with the model

Modelled: POOL ADD REMOVE LOOKUP RING HASH DIST SNAP MOVED WEIGHT LOAD BOUNDED REPLICAS ACQUIRE
RETRY RELEASE STATS VERSION DOWN UP RAMP HEALTH, on the profiles murmur32 hash64 fnv32 fnv16 ketama nginx (xxh3 through
ctypes on libxxhash when it is installed).  Not modelled: the ERR reasons (those sessions are
reviewed by hand), except RELEASE of a number not held (ERR no such lease) and DOWN, UP or RAMP
of a name not in the pool (ERR no such member).  Health (docs/design.md §3): a member that is
down is walked past by LOOKUP, SNAP, BOUNDED, REPLICAS, ACQUIRE and RETRY, and leaves the
capacities' W; RING and DIST ignore it.  A ramp is modelled when its scale does not depend on time
(ms 0, or from = to); the model refuses a session that then needs a time-dependent scale.  The model also checks the exercise's claims as it goes: after ADD every key
that moved on the ring moved to a new member, after REMOVE every key that moved had a removed
owner.
"""
import ctypes
import ctypes.util
import hashlib
import math
import os
import struct
import sys
import zlib
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))

# Sessions whose expected output this model writes.
MODELLED = [
    'exercise', 'exercise_ring', 'exercise_moved', 'lookup_wrap', 'murmur32_tie', 'hash64',
    'fnv16_tie', 'profile_fnv32', 'profile_xxh3', 'profile_ketama', 'profile_nginx', 'weights',
    'extensions', 'acquire', 'fnv16_weight', 'ketama25', 'retry', 'health',
]

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def murmur3_32(data, seed=0):
    """MurmurHash3_x86_32, as published (Austin Appleby)."""
    c1, c2 = 0xcc9e2d51, 0x1b873593
    h = seed & M32
    n = len(data)
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & M32
    for i in range(0, n - n % 4, 4):
        k = struct.unpack_from('<I', data, i)[0]
        k = (k * c1) & M32
        k = rotl(k, 15)
        k = (k * c2) & M32
        h ^= k
        h = rotl(h, 13)
        h = (h * 5 + 0xe6546b64) & M32
    tail = data[n - n % 4:]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if len(tail) >= 1:
        k ^= tail[0]
        k = (k * c1) & M32
        k = rotl(k, 15)
        k = (k * c2) & M32
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85ebca6b) & M32
    h ^= h >> 13
    h = (h * 0xc2b2ae35) & M32
    h ^= h >> 16
    return h


def fnv1a32(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & M32
    return h


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & M64
    return h


def mix64(z):
    z ^= z >> 30
    z = (z * 0xbf58476d1ce4e5b9) & M64
    z ^= z >> 27
    z = (z * 0x94d049bb133111eb) & M64
    z ^= z >> 31
    return z


_xxh = None


def xxh3_64(data):
    global _xxh
    if _xxh is None:
        path = ctypes.util.find_library('xxhash')
        if not path:
            raise RuntimeError('libxxhash not found: the xxh3 profile cannot be modelled')
        _xxh = ctypes.CDLL(path)
        _xxh.XXH3_64bits.restype = ctypes.c_uint64
        _xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return _xxh.XXH3_64bits(data, len(data))


def md5_word(data, x=0):
    return struct.unpack_from('<I', hashlib.md5(data).digest(), 4 * x)[0]


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def nginx_host_port(name):
    if name[:5].lower() == b'unix:':
        return name[5:], b''
    i = len(name)
    while i > 0 and name[i - 1:i].isdigit():
        i -= 1
    if i > 0 and name[i - 1:i] == b':':
        return name[:i - 1], name[i:]
    return name, b''


class Profile:
    def __init__(self, name):
        self.name = name
        self.bits = {'hash64': 64, 'xxh3': 64, 'murmur32': 32, 'fnv32': 32, 'fnv16': 16,
                     'ketama': 32, 'nginx': 32}[name]

    def hash(self, b):
        p = self.name
        if p == 'murmur32':
            return murmur3_32(b)
        if p == 'hash64':
            return mix64(fnv1a64(b))
        if p == 'fnv32':
            return fnv1a32(b)
        if p == 'fnv16':
            return fnv1a32(b) & 0xffff
        if p == 'xxh3':
            return xxh3_64(b)
        if p == 'ketama':
            return md5_word(b)
        if p == 'nginx':
            return zlib.crc32(b)
        raise ValueError(p)


class Model:
    def __init__(self, profile='hash64', vnodes=160, balance=1.25):
        self.p = Profile(profile)
        self.vnodes = vnodes
        self.balance = balance
        self.pool = []       # names in listed order
        self.weight = {}     # name -> weight
        self.join = []       # names in join order (fnv16)
        self.version = 0
        self.points = []     # (pos, name, index) in ring order
        self.snap = None
        self.supplied = {}   # LOAD values
        self.leases = {}     # number -> name
        self.next_lease = 0
        self.gen = {}        # name -> generation of its member object
        self.ghosted = set() # (name, generation) removed with leases out: a flap
        self.counters = {}   # name -> acquires, primary, spilled_in of the current object
        self.acquires = 0
        self.spills = 0
        self.saturated = 0
        self.retries = 0
        self.down = set()    # names of members that are down (DOWN)
        self.scale = {}      # name -> admission scale (RAMP); absent: 1; None: depends on time

    # -- building the ring -------------------------------------------------------------------
    def build(self):
        p = self.p.name
        pts = []
        names = sorted(self.weight)
        if p == 'fnv16':
            taken = set()
            for name in self.join:
                for i in range(self.vnodes * self.weight[name]):
                    label = name if i == 0 else str(i).encode() + b'-' + name
                    pos = self.p.hash(label)
                    if pos in taken:
                        continue
                    taken.add(pos)
                    pts.append((pos, name, i))
        elif p == 'ketama':
            n = len(names)
            total = sum(self.weight[x] for x in names)
            for name in names:
                pct = f32(f32(self.weight[name]) / f32(total))
                d = math.floor(f32(f32(f32(f32(pct * f32(160.0)) / f32(4.0)) * f32(n))
                                   + f32(1e-10)))
                for k in range(d):
                    digest = hashlib.md5(name + b'-' + str(k).encode()).digest()
                    for x in range(4):
                        pts.append((struct.unpack_from('<I', digest, 4 * x)[0], name, 4 * k + x))
        elif p == 'nginx':
            seen = set()
            for name in names:
                host, port = nginx_host_port(name)
                prev = 0
                for i in range(160 * self.weight[name]):
                    prev = zlib.crc32(host + b'\0' + port + struct.pack('<I', prev))
                    pts.append((prev, name, i))
            pts.sort()
            kept = []
            for pt in pts:
                if pt[0] in seen:
                    continue
                seen.add(pt[0])
                kept.append(pt)
            pts = kept
        else:
            for name in names:
                for i in range(self.vnodes * self.weight[name]):
                    pts.append((self.p.hash(name + b'#' + str(i).encode()), name, i))
        pts.sort()
        self.points = pts
        self.positions = [pt[0] for pt in pts]

    def publish(self):
        self.version += 1
        self.build()

    def first_point(self, key):
        import bisect
        h = self.p.hash(key)
        i = bisect.bisect_left(self.positions, h)
        return 0 if i == len(self.points) else i

    def raw_owner(self, key):
        """The member of the key's point, up or down."""
        if not self.points:
            return None
        return self.points[self.first_point(key)][1]

    def owner(self, key):
        """The first member clockwise from the key's point that is up (None if all are down)."""
        if not self.points:
            return None
        i = self.first_point(key)
        for step in range(len(self.points)):
            who = self.points[(i + step) % len(self.points)][1]
            if who not in self.down:
                return who
        return None

    def up_weight(self):
        return sum(w for n, w in self.weight.items() if n not in self.down)

    def scale_of(self, name):
        s = self.scale.get(name, 1.0)
        if s is None:
            raise ValueError('the scale of %r depends on time: not modelled' % name)
        return s

    def share(self, name):
        total = 1 << self.p.bits
        own = Fraction(0)
        n = len(self.points)
        for k, (pos, who, _) in enumerate(self.points):
            if who != name:
                continue
            if k == 0:
                arc = total - self.points[-1][0] + pos
            else:
                arc = pos - self.points[k - 1][0]
            own += arc
        return float(own / total)

    # -- commands ----------------------------------------------------------------------------
    def exec(self, line):
        """Returns the answer lines (bytes, without newline) for one command line."""
        words = line.split()
        if not words or words[0].startswith(b'#'):
            return []
        cmd = words[0].upper()
        rest = line[len(line) - len(line.lstrip()):]  # the line from the command word
        arg = rest[len(words[0]) + 1:]
        if cmd == b'POOL':
            names = dedupe(words[1:])
            old = dict(self.weight)
            self.pool = names
            self.weight = {n: 1 for n in names}
            self.join = [n for n in self.join if n in self.weight] + \
                [n for n in names if n not in old]
            if self.weight != old:
                self.publish()
            self.drop_removed()
            return [b'OK']
        if cmd == b'ADD':
            new = [n for n in dedupe(words[1:]) if n not in self.weight]
            before = self.owners_all()
            for n in new:
                self.pool.append(n)
                self.weight[n] = 1
                self.join.append(n)
            if new:
                self.publish()
                self.check_moves(before, lambda old, now: now in new)
            self.drop_removed()
            return [b'OK']
        if cmd == b'REMOVE':
            gone = [n for n in dedupe(words[1:]) if n in self.weight]
            before = self.owners_all()
            for n in gone:
                self.pool.remove(n)
                del self.weight[n]
                self.join.remove(n)
            if gone:
                self.publish()
                self.check_moves(before, lambda old, now: old in gone)
            self.drop_removed()
            return [b'OK']
        if cmd == b'LOOKUP':
            o = self.owner(arg)
            return [o if o is not None else b'EMPTY']
        if cmd == b'HASH':
            return [str(self.p.hash(arg)).encode()]
        if cmd == b'RING':
            return [str(pos).encode() + b':' + name for pos, name, _ in self.points]
        if cmd == b'DIST':
            return [n + (' points=%d share=%.4f' % (sum(1 for pt in self.points if pt[1] == n),
                                                     self.share(n))).encode()
                    for n in self.pool]
        if cmd == b'SNAP':
            count = int(words[1])
            self.snap = [(self.owner(k), self.mod_owner(k)) for k in keys(count)]
            return [b'OK']
        if cmd == b'MOVED':
            ring = sum(1 for k, (r, _) in zip(keys(len(self.snap)), self.snap)
                       if self.owner(k) != r)
            mod = sum(1 for k, (_, m) in zip(keys(len(self.snap)), self.snap)
                      if self.mod_owner(k) != m)
            return [b'ring=%d mod=%d' % (ring, mod)]
        if cmd == b'WEIGHT':
            name, w = words[1], int(words[2])
            if self.weight[name] != w:
                self.weight[name] = w
                self.publish()
            return [b'OK']
        if cmd == b'LOAD':
            self.supplied[words[1]] = int(words[2])
            return [b'OK']
        if cmd == b'BOUNDED':
            return [self.bounded(arg, lambda n: self.supplied.get(n, 0),
                                 sum(self.supplied.get(n, 0) for n in self.pool))]
        if cmd == b'ACQUIRE':
            return [self.acquire(arg, set())]
        if cmd == b'RETRY':
            # RETRY <count> <name>... <key>: the key is what follows the last name (or the count)
            # and exactly one space.
            count, pos = next_word(arg, 0)
            skip = set()
            for _ in range(int(count)):
                name, pos = next_word(arg, pos)
                skip.add(name)
            assert arg[pos:pos + 1] == b' ', 'RETRY without its key'
            return [self.acquire(arg[pos + 1:], skip, retry=True)]
        if cmd == b'RELEASE':
            if self.leases.pop(int(words[1]), None) is None:
                return [b'ERR no such lease']
            return [b'OK']
        if cmd == b'STATS':
            out = [b'version=%d publishes=%d members=%d points=%d leases=%d acquires=%d '
                   b'spills=%d saturated=%d retries=%d down=%d' % (
                       self.version, self.version, len(self.pool), len(self.points),
                       len(self.leases), self.acquires, self.spills, self.saturated,
                       self.retries, len(self.down))]
            for n in self.pool:
                st = self.counters[n]
                out.append(n + b' weight=%d load=%d acquires=%d primary=%d spilled_in=%d '
                           b'supplied=%d' % (self.weight[n], self.live_load(n), st['acquires'],
                                             st['primary'], st['spilled_in'],
                                             self.supplied.get(n, 0)))
            return out
        if cmd == b'REPLICAS':
            body = arg.rstrip()
            sp = max(body.rfind(b' '), body.rfind(b'\t'))
            key, n = body[:sp], int(body[sp + 1:])
            if not self.points:
                return [b'EMPTY']
            out = []
            i = self.first_point(key)
            for step in range(len(self.points)):
                who = self.points[(i + step) % len(self.points)][1]
                if who not in out and who not in self.down:
                    out.append(who)
                if len(out) == n:
                    break
            return [b' '.join(out) if out else b'EMPTY']
        if cmd == b'VERSION':
            return [str(self.version).encode()]
        if cmd in (b'DOWN', b'UP'):
            names = dedupe(words[1:])
            if any(n not in self.weight for n in names):
                return [b'ERR no such member']
            for n in names:
                if cmd == b'DOWN':
                    self.down.add(n)
                else:
                    self.down.discard(n)
            return [b'OK']
        if cmd == b'RAMP':
            name, lo, hi, ms = words[1], float(words[2]), float(words[3]), int(words[4])
            if name not in self.weight:
                return [b'ERR no such member']
            # s moves from lo to hi over ms milliseconds: constant when ms is 0 or lo == hi.
            self.scale[name] = hi if ms == 0 or lo == hi else None
            return [b'OK']
        if cmd == b'HEALTH':
            return [n + b' down=%d scale=%.4f' % (n in self.down, self.scale_of(n))
                    for n in self.pool]
        raise ValueError('the model does not know %r' % line)

    def drop_removed(self):
        """A member that leaves loses its LOAD value and counters; a name that joins again is a
        new member object (a new generation), so leases on the old one do not count as its load.
        """
        self.supplied = {n: v for n, v in self.supplied.items() if n in self.weight}
        self.down &= set(self.weight)
        self.scale = {n: v for n, v in self.scale.items() if n in self.weight}
        for n in list(self.counters):
            if n not in self.weight:
                # A member leaving with leases out (its own or inherited) is a ghost: the next
                # member of its name counts them (a flap, docs/design.md §3).
                if self.counted_load(n) > 0:
                    self.ghosted.add((n, self.gen[n]))
                del self.counters[n]
        for n in self.weight:
            if n not in self.counters:
                self.gen[n] = self.gen.get(n, 0) + 1
                self.counters[n] = {'acquires': 0, 'primary': 0, 'spilled_in': 0}

    def acquire(self, key, skip, retry=False):
        """ACQUIRE (skip empty) and RETRY: the bounded walk on the built-in counters, passing over
        the members named in skip as if they were full.  m counts every outstanding lease, those
        on removed members included (docs/design.md §3).  When every member met outside skip is
        full, the first least loaded one met takes the key and a saturation event is counted;
        when every member met is skipped there is no lease (EMPTY)."""
        who, saturated = self.walk(key, self.counted_load, len(self.leases), skip)
        if who is None:
            return b'EMPTY'
        # Without skip and ramps the loads of the members sum to at most m, below the sum of
        # their capacities, so a single-threaded ACQUIRE always finds room.
        assert retry or self.scale or not saturated, 'ACQUIRE found no member below capacity'
        self.next_lease += 1
        self.leases[self.next_lease] = (who, self.gen[who])
        st = self.counters[who]
        st['acquires'] += 1
        self.acquires += 1
        if saturated:
            self.saturated += 1
        if retry:
            self.retries += 1
        # The key's owner here is the member of its point, up or down (as chring_stats counts
        # it).  A key whose owner is down and that lands on the first member up after it (no
        # skipped member before that one) went where a lookup sends it: not a spill
        # (CHRING_OUTCOME_OWNER_DOWN, counted apart); past that member it is a spill.
        if who == self.raw_owner(key):
            st['primary'] += 1
        elif not saturated and who == self.first_up_unskipped(key, skip):
            pass
        else:
            st['spilled_in'] += 1
            self.spills += 1
        return who + b' %d' % self.next_lease

    def first_up_unskipped(self, key, skip):
        """The first member clockwise from the key's point that is up and not skipped, or None
        when a skipped member comes before it."""
        i = self.first_point(key)
        for step in range(len(self.points)):
            who = self.points[(i + step) % len(self.points)][1]
            if who in skip:
                return None
            if who in self.down:
                continue
            return who
        return None

    def walk(self, key, load, m, skip):
        """(chosen member, saturated): the first member clockwise from the key's point, outside
        skip and up, whose load is 0 or below its capacity ceil(c * (m + 1) * e / E) (docs/design.md
        §3, effective weights: e = s * w, s the member's admission scale, and E the sum of e over
        the members that are up, skipped ones too, in name order as the library sums it); a member
        at s = 0 admits nothing.  Else the first least loaded member met outside skip at s > 0
        relative to its weight (load / w), saturated, or failing that the same among those at
        s = 0; (None, False) when there is none."""
        if not self.points:
            return None, False
        c = self.balance if self.balance >= 1 else 1.0
        total_w = 0.0
        for n in sorted(self.weight):
            if n not in self.down:
                s = self.scale_of(n)
                total_w += s * self.weight[n] if s < 1 else float(self.weight[n])
        i = self.first_point(key)
        least = parked = None
        for step in range(len(self.points)):
            who = self.points[(i + step) % len(self.points)][1]
            if who in skip or who in self.down:
                continue
            s = self.scale_of(who)
            w = self.weight[who]
            if s <= 0:
                if parked is None or load(who) * self.weight[parked] < load(parked) * w:
                    parked = who
                continue
            e = s * w if s < 1 else float(w)
            cap = math.ceil(c * (m + 1) * e / total_w) if total_w > 0 else 0
            if load(who) == 0 or load(who) < cap:
                return who, False
            if least is None or load(who) * self.weight[least] < load(least) * w:
                least = who
        if least is None:
            least = parked
        return least, least is not None

    def live_load(self, name):
        return sum(1 for who in self.leases.values() if who == (name, self.gen.get(name)))

    def counted_load(self, name):
        """What the bound counts for the member of that name: its leases and those of the
        earlier members of its name that left with leases out (ghosts, docs/design.md §3)."""
        g = self.gen.get(name)
        return sum(1 for (n, gg) in self.leases.values()
                   if n == name and (gg == g or ((n, gg) in self.ghosted and gg < g)))

    def bounded(self, key, load, m):
        """docs/design.md §3: the first member clockwise from the key's owner whose load is below
        its capacity ceil(c * (m + 1) * w / W), computed in IEEE double left to right."""
        if not self.points or self.owner(key) is None:
            return b'EMPTY'
        c = self.balance if self.balance >= 1 else 1.0
        total_w = self.up_weight()
        i = self.first_point(key)
        for step in range(len(self.points)):
            who = self.points[(i + step) % len(self.points)][1]
            if who in self.down:
                continue  # walked past; its LOAD value still counts in m
            cap = math.ceil(c * (m + 1) * self.weight[who] / total_w)
            if load(who) < cap:
                return who
        raise AssertionError('no member below capacity')

    def mod_owner(self, key):
        return self.pool[self.p.hash(key) % len(self.pool)] if self.pool else None

    def owners_all(self):
        return [self.owner(k) for k in keys(len(self.snap))] if self.snap else []

    def check_moves(self, before, allowed):
        """The exercise's claim: a join moves keys only to the new member, a leave moves only the
        leaver's keys (not for ketama, whose point counts depend on the whole membership)."""
        if not before or self.p.name == 'ketama':
            return
        for k, old in zip(keys(len(before)), before):
            now = self.owner(k)
            if old is not None and now != old and not allowed(old, now):
                raise AssertionError('key %r moved from %r to %r' % (k, old, now))


def dedupe(names):
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def next_word(b, pos):
    """The blank-separated word of b at or after pos, and the position just after it."""
    blanks = b' \t\r\v\f\n'
    while pos < len(b) and b[pos] in blanks:
        pos += 1
    end = pos
    while end < len(b) and b[end] not in blanks:
        end += 1
    assert end > pos, 'a word is missing'
    return b[pos:end], end


def keys(n):
    return [b'key%d' % i for i in range(n)]


def parse_args_line(first):
    opts = {'profile': 'hash64', 'vnodes': 160, 'balance': 1.25}
    words = first.decode().split()[2:] if first.startswith(b'# args:') else []
    i = 0
    while i < len(words):
        opts[words[i][2:]] = words[i + 1]
        i += 2
    return Model(opts['profile'], int(opts['vnodes']), float(opts['balance']))


def run_session(path):
    with open(path, 'rb') as f:
        lines = f.read().split(b'\n')
    if lines and lines[-1] == b'':
        lines.pop()
    model = parse_args_line(lines[0] if lines else b'')
    out = []
    for line in lines:
        out.extend(model.exec(line))
    return b''.join(x + b'\n' for x in out)


def main(argv):
    if len(argv) == 2 and argv[1] in ('--check', '--write'):
        bad = 0
        for name in MODELLED:
            got = run_session(os.path.join(HERE, name + '.in'))
            path = os.path.join(HERE, name + '.out')
            if argv[1] == '--write':
                with open(path, 'wb') as f:
                    f.write(got)
                continue
            with open(path, 'rb') as f:
                want = f.read()
            if got != want:
                print('%s.out differs from the reference model' % name)
                bad += 1
            else:
                print('%s.out matches the reference model' % name)
        return 1 if bad else 0
    if len(argv) == 2:
        sys.stdout.buffer.write(run_session(argv[1]))
        return 0
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
