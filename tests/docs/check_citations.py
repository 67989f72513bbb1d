#!/usr/bin/env python3
"""Every citation in the tree resolves inside the repository (CONTRIBUTING.md, "Citations").

Three kinds of citation are checked, in the source, build, test and documentation files of the
areas listed in AREAS:

- a section of a document, `docs/design.md §3` (also `§3, §4`, `§2–§3`, `§1-§6` and `§3 and §4`
  after the document's name, and a bare `§N` inside docs/design.md itself): the document must
  exist and have a heading numbered so (`## §3 ...`, `### §2.1 ...`, or bench.md's `### 7. ...`
  and `### 1, 2. ...`);
- a repository path, `tests/cli/run.sh`, `src/find.h`, `lb/` (a glob such as `tests/test_*.c` must
  match something; a placeholder such as `tests/cli/<name>.in` is checked up to the placeholder's
  folder): the file or folder must exist (a build output, `tests/stress/chring-torture` or
  `vmod/libvmod_chring.so`, by its folder and a target of that name; paths of Varnish's own tree,
  `vmod/tests/...`, are not ours and not checked);
- a meson test name in backquotes, `cli-ref-exercise`, `lb-fleet-agree`: some meson.build must
  register it, literally (`test('cli-input', ...)`) or as a prefix and a quoted word of the same
  file (`test('lb-fleet-' + t[0], ...)` over `['agree', ...]`).

Usage: check_citations.py [SOURCE_ROOT]   (default: the repository this script is in)
       check_citations.py --self-test      (a small tree with one dead citation of each kind)
Prints each dead citation as FILE:LINE: what, and exits 1 if there is any.
"""
import glob
import os
import re
import sys

AREAS = ['src', 'include', 'tools', 'tests', 'bench', 'lb', 'nginx', 'vmod', 'fuzz', 'docs', 'man',
         'README.md', 'CONTRIBUTING.md', 'Makefile', 'meson.build', 'meson_options.txt',
         'scripts', '.ci', 'packaging']
# Folders whose files are data, not prose (fuzzer inputs, golden maps, CLI sessions).
DATA_DIRS = ['fuzz/corpus', 'fuzz/regress', 'tests/compat/golden', 'bench/results']
TEXT_EXT = ('.c', '.h', '.cpp', '.py', '.sh', '.md', '.in', '.build', '.txt', '.gp', '.supp',
            '.cmake', '.conf', '.dict')
TEXT_NAMES = ('Makefile', 'meson.build', 'meson_options.txt', 'run', 'config')
# The top folders a cited path may start with; `examples/` is one a citation may still name
# after a move (the balancer moved from examples/lb to lb/).
PATH_ROOTS = ['src', 'include', 'tools', 'tests', 'bench', 'lb', 'nginx', 'vmod', 'fuzz', 'docs',
              'man',
              'scripts', 'packaging', 'examples', '.ci']

SECTION_REF = re.compile(
    r'(?<![\w/.-])((?:docs/)?[a-z_-]+\.md)`?(?:\]\([^)]*\))?'
    r'((?:(?:\s*,\s*|\s+and\s+|\s*[-–]\s*|\s+)§\d+(?:\.\d+)*)+)')
SECTION_NUM = re.compile(r'§(\d+(?:\.\d+)*)')
BARE_SECTION = re.compile(r'(?<![\w.])§(\d+(?:\.\d+)*)')
PATH_REF = re.compile(
    r'(?<![\w./~$@-])((?:' + '|'.join(re.escape(p) for p in PATH_ROOTS) +
    r')/[\w.*/<>+-]*)')
BACKQUOTED = re.compile(r'`([a-z0-9][a-z0-9_-]*)`')
MESON_TEST = re.compile(r"""\btest\(\s*'([^']+)'\s*(\+)?(?:\s*[A-Za-z_][A-Za-z0-9_\[\]]*\s*\+\s*'([^']+)')?""")
# What the build makes: a cited build output (`tests/stress/chring-torture`) is a path in the
# build directory, checked by its folder in the source tree and its target's name.
MESON_TARGET = re.compile(
    r"""\b(?:executable|library|static_library|shared_library|shared_module|custom_target)"""
    r"""\(\s*'([^']+)'""")
QUOTED = re.compile(r"'([A-Za-z0-9_.-]+)'")


# This file and the map's checker name dead citations on purpose (in their comments and their
# self-tests' planted trees), and are not read.
SELF = ('tests/docs/check_citations.py', 'tests/docs/check_map.py')
# Paths in another project's tree that begin with a folder name of ours: Varnish's own tests,
# vmod/tests/*.vtc of varnishcache/varnish-cache, which the varnish golden data come from.
FOREIGN = ('vmod/tests/',)


def debian_packages(root):
    """The packages scripts/deps.sh names (`nginx-dev` is a package, not a test)."""
    with open(os.path.join(root, 'scripts', 'deps.sh'), encoding='utf-8') as f:
        return set(re.findall(r'[a-z0-9][a-z0-9.+-]+', f.read()))


def repo_files(root):
    for area in AREAS:
        top = os.path.join(root, area)
        if os.path.isfile(top):
            yield area
            continue
        for d, dirs, files in os.walk(top):
            rel_d = os.path.relpath(d, root)
            dirs[:] = [x for x in dirs
                       if os.path.join(rel_d, x) not in DATA_DIRS and not x.startswith('build')
                       and x != '__pycache__']
            for f in files:
                if f.endswith(TEXT_EXT) or f in TEXT_NAMES:
                    yield os.path.join(rel_d, f)


def doc_sections(path):
    """The section numbers of a document's headings: §N (design.md) or N. (bench.md)."""
    found = set()
    with open(path, encoding='utf-8') as f:
        for line in f:
            m = re.match(r'#+\s+§(\d+(?:\.\d+)*)\s', line)
            if m:
                found.add(m.group(1))
                continue
            m = re.match(r'#+\s+(\d+(?:\s*,\s*\d+)*)\.\s', line)
            if m:
                found.update(n.strip() for n in m.group(1).split(','))
    return found


def meson_tests(root):
    """Test names registered literally, (prefix, words of that file) for built names, and the
    names of the build's targets."""
    literal, built, targets = set(), [], set()
    for rel in repo_files(root):
        if os.path.basename(rel) != 'meson.build':
            continue
        with open(os.path.join(root, rel), encoding='utf-8') as f:
            text = f.read()
        words = set(QUOTED.findall(text))
        targets.update(MESON_TARGET.findall(text))
        for m in MESON_TEST.finditer(text):
            if m.group(2):
                built.append((m.group(1), words, m.group(3) or ''))
            else:
                literal.add(m.group(1))
    return literal, built, targets


def test_prefixes(literal, built):
    """The first word of every test name (cli, lb, nginx, compat, ...): a backquoted word that
    starts with one of them and a hyphen is read as a test name."""
    names = list(literal) + [p for p, _, _ in built]
    return {n.split('-')[0] + '-' for n in names if '-' in n}


def is_test(name, literal, built):
    if name in literal:
        return True
    return any(name.startswith(p) and name.endswith(suffix) and
               name[len(p):len(name) - len(suffix)] in words for p, words, suffix in built)


def path_exists(root, cited, after, targets):
    cited = cited.rstrip('.,:;')
    last = cited.rstrip('/').rsplit('/', 1)[-1]
    # A placeholder (tests/cli/<name>.in, fuzz/corpus/TARGET, tests/test_$suite): its folder must
    # exist.
    if '<' in cited or after in ('$', '{') or (last.isupper() and len(last) > 1):
        cited = cited[:cited.index('<')] if '<' in cited else cited
        cited = cited[:cited.rfind('/') + 1]
    cited = cited.rstrip('/') or cited
    if cited.startswith(FOREIGN):
        return True
    # A build output: the target's name, or the file a module target makes (lib<name>.so).
    base = os.path.basename(cited)
    if ((base in targets or re.sub(r'^lib|\.so$', '', base) in targets) and
            os.path.isdir(os.path.join(root, os.path.dirname(cited)))):
        return True
    if '*' in cited:
        return bool(glob.glob(os.path.join(root, cited)))
    return os.path.exists(os.path.join(root, cited))


def check(root):
    sections = {}
    literal, built, targets = meson_tests(root)
    prefixes = test_prefixes(literal, built)
    packages = debian_packages(root)
    dead = []
    for rel in sorted(repo_files(root)):
        if rel in SELF:
            continue
        try:
            with open(os.path.join(root, rel), encoding='utf-8') as f:
                lines = f.read().split('\n')
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(lines, 1):
            where = '%s:%d' % (rel, n)
            cites = []
            for m in SECTION_REF.finditer(line):
                doc = m.group(1) if m.group(1).startswith('docs/') else 'docs/' + m.group(1)
                cites += [(doc, s) for s in SECTION_NUM.findall(m.group(2))]
            if rel == 'docs/design.md' and not line.startswith('#'):
                spans = [m.span() for m in SECTION_REF.finditer(line)]
                for m in BARE_SECTION.finditer(line):
                    if not any(a <= m.start() < b for a, b in spans):
                        cites.append((rel, m.group(1)))
            for doc, sec in cites:
                if doc not in sections:
                    full = os.path.join(root, doc)
                    sections[doc] = doc_sections(full) if os.path.isfile(full) else None
                if sections[doc] is None:
                    dead.append('%s: %s §%s: no such document' % (where, doc, sec))
                elif sec not in sections[doc]:
                    dead.append('%s: %s has no §%s' % (where, doc, sec))
            for m in PATH_REF.finditer(line):
                after = line[m.end():m.end() + 1]
                if not path_exists(root, m.group(1), after, targets):
                    dead.append('%s: %s: no such file or folder' % (where, m.group(1)))
            for m in BACKQUOTED.finditer(line):
                name = m.group(1)
                if (any(name.startswith(p) for p in prefixes) and name not in packages and
                        not is_test(name, literal, built)):
                    dead.append('%s: `%s`: no meson test of that name' % (where, name))
    return dead


def self_test():
    """The checker must find a planted dead citation of each kind, and nothing else."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        files = {
            'docs/design.md': '# d\n\n## §1 One\n\n### §1.1 Sub\n\nSee §1.1 and §2.\n',
            'scripts/deps.sh': 'DEPS="nginx-dev"\n',
            'tests/meson.build': "test('cli-' + n, x)\nforeach n : ['alpha']\ntest('pkg-one', y)\n",
            'vmod/meson.build': "shared_module('vmod_x', 'x.c')\n",
            'src/a.c': ('/* docs/design.md §1, §1.1 and §7; src/a.c, src/gone.c; tests/<x>.c;\n'
                        ' * `cli-alpha`, `pkg-one`, `nginx-dev`, `cli-beta`; `docs/design.md` §9.\n'
                        ' * [docs/design.md](docs/design.md) §1–§1.1.\n'
                        ' * vmod/libvmod_x.so, vmod/libvmod_y.so; Varnish\'s vmod/tests/a.vtc. */\n'),
        }
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w', encoding='utf-8') as f:
                f.write(text)
        dead = check(root)
        want = ['docs/design.md:7: docs/design.md has no §2',
                'src/a.c:1: docs/design.md has no §7',
                'src/a.c:1: src/gone.c: no such file or folder',
                'src/a.c:2: docs/design.md has no §9',
                'src/a.c:2: `cli-beta`: no meson test of that name',
                'src/a.c:4: vmod/libvmod_y.so: no such file or folder']
        if dead != want:
            print('self-test: found\n  %s\nwanted\n  %s' % ('\n  '.join(dead), '\n  '.join(want)))
            return 1
    print('self-test: the six planted dead citations found, nothing else')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(here))
    dead = check(root)
    for d in dead:
        print(d)
    print('%d dead citation%s' % (len(dead), '' if len(dead) == 1 else 's'))
    return 1 if dead else 0


if __name__ == '__main__':
    sys.exit(main())
