#!/usr/bin/env python3
"""The tree's map is whole: every list that must name each area, public call, errno or profile
names it (CONTRIBUTING.md, "Adding an area"; docs/design.md §2, §5 and §9).

Seven kinds of omission are found, each reported at the line that makes the thing exist, with
what to add and where:

- an area: a top-level folder of the repository that holds a file (hidden folders, those the
  top of .gitignore names and build directories aside) must have a row in docs/design.md §9's
  table of areas; be in AREAS and PATH_ROOTS of tests/docs/check_citations.py when it holds code
  or prose (a .c, .h, .cpp, .py, .sh or .md file, or a meson.build, anywhere under it); be
  configured by a subdir() of the top meson.build when it has a meson.build; and be in
  FORMAT_DIRS of the Makefile when it holds C or C++;
- a public function: every `CHRING_API` function of include/chring.h must be named in the API map
  of docs/design.md §5 ("The API in groups");
- an errno: every entry of src/errors.h must be in the results list of docs/design.md §5
  ("Results.");
- a profile: every value of include/chring.h's chring_profile_t must have a row in the profile
  table of docs/design.md §2;
- a header comment: every `CHRING_API` function's comment (the one above it, or above the
  declarations it is grouped with) must say its thread rule ("Any thread", "Reader side",
  "Writer side", or which threads) and, when it takes a pointer, its answer to NULL
  (docs/design.md §5, "NULL" and "Threads");
- a list of profiles by hand: a line of docs/, README.md or CONTRIBUTING.md outside
  docs/design.md §2 that names six or more profiles in backquotes (§2's table is the one list;
  the programs write theirs from chring_profile_info);
- a source file: every .c and .h of src/ must have its row in docs/design.md §9's table of source
  files, and src/meson.build must compile them in that table's order.

With --chain it also holds src/ to the chain that table states: a file may include, and use the
chring__ functions and the macros defined in, only the files of its own row and the rows before.
The `map` test runs with it.

The other way round, a name the map, the results list or the profile table holds and the header
or src/errors.h does not is reported too (a renamed or removed call leaves a stale entry).

Usage: check_map.py [--chain] [SOURCE_ROOT]   (default: the repository this script is in)
       check_map.py --self-test    (a small tree, whole, then with one omission of each kind)
Prints each omission as FILE:LINE: what (and what to add where), and exits 1 if there is any.
"""
import ast
import fnmatch
import os
import re
import sys

CODE_EXT = ('.c', '.h', '.cpp', '.py', '.sh')
C_EXT = ('.c', '.h', '.cpp')
DESIGN = 'docs/design.md'
HEADER = 'include/chring.h'
ERRORS = 'src/errors.h'
CITATIONS = 'tests/docs/check_citations.py'


def read_lines(root, rel):
    with open(os.path.join(root, rel), encoding='utf-8') as f:
        return f.read().split('\n')


def ignored_top(root):
    """The top-level patterns of .gitignore (`/build*/`, `/out/`): build trees, not areas."""
    pats = []
    try:
        for line in read_lines(root, '.gitignore'):
            line = line.strip()
            if line.startswith('/') and line.endswith('/'):
                pats.append(line.strip('/'))
    except FileNotFoundError:
        pass
    return pats


def code_areas(root):
    """{folder: (holds code or prose, holds C or C++, has meson.build)} for every top-level folder
    that holds a file."""
    skip = ignored_top(root)
    areas = {}
    for top in sorted(os.listdir(root)):
        full = os.path.join(root, top)
        if (not os.path.isdir(full) or top.startswith('.') or top.startswith('build') or
                top == '__pycache__' or any(fnmatch.fnmatch(top, p) for p in skip) or
                os.path.exists(os.path.join(full, 'meson-private'))):
            continue  # hidden, ignored, or a build directory of any name
        held = code = c = False
        for d, dirs, files in os.walk(full):
            dirs[:] = [x for x in dirs if not x.startswith('.') and x != '__pycache__']
            for f in files:
                held = True
                if f.endswith(CODE_EXT + ('.md',)) or f == 'meson.build':
                    code = True
                if f.endswith(C_EXT):
                    c = True
        if held:
            areas[top] = (code, c, os.path.isfile(os.path.join(full, 'meson.build')))
    return areas


def section(lines, number):
    """(first, last) line indexes of docs/design.md's section §number, its subsections included."""
    start = None
    for i, line in enumerate(lines):
        m = re.match(r'##\s+§(\d+)\s', line)
        if m:
            if start is not None:
                return start, i
            if m.group(1) == str(number):
                start = i
    if start is None:
        return None
    return start, len(lines)


def table_after(lines, first, last, head):
    """The rows of the first table in lines[first:last] whose header's first cell is `head`:
    [(line index, first cell)]."""
    rows, inside = [], False
    for i in range(first, last):
        cells = [c.strip() for c in lines[i].strip().strip('|').split('|')]
        if not lines[i].startswith('|'):
            if inside:
                break
            continue
        if not inside:
            if cells[0] == head:
                inside = True
            continue
        if set(cells[0]) <= set('-: '):
            continue
        rows.append((i, cells[0]))
    return rows


def block(lines, first, last, marker):
    """The paragraph of lines[first:last] that begins with the line holding marker, with the
    bullet list that follows it, up to a blank line that no bullet follows; or, when the marker's
    line is a bullet, that bullet alone: [(line index, text)]."""
    for i in range(first, last):
        if marker in lines[i]:
            out = [(i, lines[i])]
            bullet = lines[i].lstrip().startswith('- ')
            for j in range(i + 1, last):
                line = lines[j]
                if bullet and line.lstrip().startswith('- '):
                    break
                if not line.strip():
                    if bullet or j + 1 >= last or not lines[j + 1].startswith(('- ', '  ')):
                        break
                    continue
                out.append((j, line))
            return out
    return None


def python_list(root, rel, name):
    """The literal list assigned to `name` in a Python file, and the line of the assignment."""
    text = '\n'.join(read_lines(root, rel))
    for node in ast.parse(text).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            return ast.literal_eval(node.value), node.lineno
    return None, None


def strip_comments(text):
    """C text with its comments blanked out, newlines kept, so offsets give line numbers."""
    return re.sub(r'/\*.*?\*/|//[^\n]*',
                  lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)


def line_of(text, offset):
    return text.count('\n', 0, offset) + 1


def check_areas(root, design, found):
    areas = code_areas(root)
    span = section(design, 9)
    rows = table_after(design, span[0], span[1], 'area') if span else []
    listed = set()
    for _, cell in rows:
        listed.update(m.rstrip('/') for m in re.findall(r'`(\.?[\w-]+)/', cell))
    table_at = '%s:%d' % (DESIGN, (rows[0][0] + 1) if rows else (span[0] + 1 if span else 1))
    lists = {}
    for name in ('AREAS', 'PATH_ROOTS'):
        value, at = python_list(root, CITATIONS, name)
        lists[name] = (set(value or []), at or 1)
    make = read_lines(root, 'Makefile')
    fmt_at, fmt = 1, set()
    for i, line in enumerate(make):
        m = re.match(r'FORMAT_DIRS\s*:?=\s*(.*)', line)
        if m:
            fmt_at, fmt = i + 1, set(m.group(1).split())
    top_meson = '\n'.join(read_lines(root, 'meson.build'))
    subdirs = {s.split('/')[0] for s in re.findall(r"subdir\('([^']+)'\)", top_meson)}
    for area, (has_code, has_c, has_meson) in sorted(areas.items()):
        where = '%s/' % area
        if area not in listed:
            found.append('%s: %s has no row in the table of areas of docs/design.md §9 (%s): add '
                         '"| `%s/` | what it holds | what it may use | its document | its tests |"'
                         % (where, area, table_at, area))
        for name in ('AREAS', 'PATH_ROOTS'):
            if has_code and area not in lists[name][0]:
                found.append("%s: %s is not in %s of %s (%s:%d): add '%s'"
                             % (where, area, name, CITATIONS, CITATIONS, lists[name][1], area))
        if has_meson and area not in subdirs:
            found.append("%s: %s/meson.build is not configured by the top meson.build: add "
                         "subdir('%s') under the option that builds it" % (where, area, area))
        if has_c and area not in fmt:
            found.append('%s: %s holds C but is not in FORMAT_DIRS (Makefile:%d): add %s'
                         % (where, area, fmt_at, area))


def header_functions(root):
    """[(line, name)] of the CHRING_API functions of the header, in header order."""
    text = strip_comments('\n'.join(read_lines(root, HEADER)))
    return [(line_of(text, m.start()), m.group(1))
            for m in re.finditer(r'^CHRING_API\b[^;{(]*?\b(chring_\w+)\s*\(', text, re.M)]


def check_api(root, design, found):
    header_text = '\n'.join(read_lines(root, HEADER))
    span = section(design, 5)
    api = block(design, span[0], span[1], '**The API in groups') if span else None
    if not api:
        found.append('%s:%d: §5 has no "The API in groups" map' %
                     (DESIGN, span[0] + 1 if span else 1))
        return
    named = {}
    for i, line in api:
        for m in re.finditer(r'`((?:chring|CHRING)_[\w*]+)`', line):
            named.setdefault(m.group(1), i + 1)
    functions = header_functions(root)
    previous = None
    for n, name in functions:
        if name not in named:
            if previous:
                hint = ('to the line of `%s` (%s:%d), its neighbour in the header, or a group of '
                        'its own' % (previous, DESIGN, named[previous]))
            else:
                hint = 'to its group (%s:%d)' % (DESIGN, api[0][0] + 1)
            found.append('%s:%d: %s is not in the API map of docs/design.md §5 ("The API in '
                         'groups"): add `%s` %s' % (HEADER, n, name, name, hint))
        else:
            previous = name
    known = set(re.findall(r'\b((?:chring|CHRING)_\w+)', header_text))
    for name, n in sorted(named.items(), key=lambda x: x[1]):
        ok = (any(k.startswith(name[:-1]) for k in known) if name.endswith('*')
              else name in known)
        if not ok:
            found.append('%s:%d: `%s` is in the API map but %s does not declare it: mend or drop '
                         'it' % (DESIGN, n, name, HEADER))


def header_comments(root):
    """[(line, name, comment, parameters)] of the CHRING_API functions: the comment is the one
    just above the declaration, or above the declarations it is grouped with (no blank line
    between), '' when there is none."""
    lines = read_lines(root, HEADER)
    text = strip_comments('\n'.join(lines))
    out = []
    for m in re.finditer(r'^CHRING_API\b[^;{(]*?\b(chring_\w+)\s*\(', text, re.M):
        n = line_of(text, m.start())
        depth, k = 1, m.end()
        while depth and k < len(text):
            depth += {'(': 1, ')': -1}.get(text[k], 0)
            k += 1
        params = text[m.end():k - 1]
        j = n - 2
        # Up over the declarations grouped with this one (their lines, continuations included).
        while j >= 0 and lines[j].strip() and not lines[j].rstrip().endswith('*/') and (
                lines[j].startswith('CHRING_API') or lines[j].startswith(' ')):
            j -= 1
        comment = []
        if j >= 0 and lines[j].rstrip().endswith('*/'):
            while j >= 0:
                comment.insert(0, lines[j])
                if '/*' in lines[j]:
                    break
                j -= 1
        words = ' '.join(re.sub(r'^\s*/?\*+|\*/\s*$', '', c) for c in comment)
        out.append((n, m.group(1), re.sub(r'\s+', ' ', words).strip(), params))
    return out


def check_comments(root, found):
    """docs/design.md §5: every public function's comment says its threads and, when it takes
    a pointer, what it answers for NULL."""
    for n, name, comment, params in header_comments(root):
        if not re.search(r'(?i)\bthreads?\b|\breader side\b|\bwriter side\b', comment):
            found.append('%s:%d: %s has no thread rule in its header comment: say "Any thread.", '
                         '"Reader side." or "Writer side." (docs/design.md §5, "Threads")'
                         % (HEADER, n, name))
        if '*' in params and 'NULL' not in comment:
            found.append('%s:%d: %s takes a pointer but its header comment gives no NULL answer: '
                         'say what it returns or does for each NULL argument (docs/design.md §5, '
                         '"NULL")' % (HEADER, n, name))


def check_errors(root, design, found):
    errors = [(i + 1, m.group(1)) for i, line in enumerate(read_lines(root, ERRORS))
              for m in re.finditer(r'\bX\((E[A-Z0-9]+)\s*,', line)]
    span = section(design, 5)
    results = block(design, span[0], span[1], '**Results.**') if span else None
    if not results:
        found.append('%s:%d: §5 has no "**Results.**" list' % (DESIGN, span[0] + 1 if span else 1))
        return
    listed = {}
    for i, line in results:
        for m in re.finditer(r'`-(E[A-Z0-9]+)`', line):
            listed.setdefault(m.group(1), i + 1)
    for n, name in errors:
        if name not in listed:
            found.append('%s:%d: -%s is not in the results list of docs/design.md §5 (%s:%d, '
                         '"Results."): add `-%s` to its list of errno values'
                         % (ERRORS, n, name, DESIGN, results[0][0] + 1, name))
    known = {name for _, name in errors}
    for name, n in sorted(listed.items(), key=lambda x: x[1]):
        if name not in known:
            found.append('%s:%d: `-%s` is in the results list but not in %s: add it there first'
                         % (DESIGN, n, name, ERRORS))


def check_profiles(root, design, found):
    text = strip_comments('\n'.join(read_lines(root, HEADER)))
    m = re.search(r'typedef\s+enum\s*\{(.*?)\}\s*chring_profile_t\s*;', text, re.S)
    if not m:
        found.append('%s:1: no chring_profile_t enum' % HEADER)
        return
    values = [(line_of(text, m.start(1) + v.start()), v.group(1))
              for v in re.finditer(r'\bCHRING_PROFILE_(\w+)', m.group(1))]
    span = section(design, 2)
    rows = table_after(design, span[0], span[1], 'profile') if span else []
    if not rows:
        found.append('%s:%d: §2 has no profile table (a table whose first column is "profile")'
                     % (DESIGN, span[0] + 1 if span else 1))
        return
    listed = {}
    for i, cell in rows:
        mm = re.match(r'`([\w-]+)`', cell)
        if mm:
            listed.setdefault(mm.group(1), i + 1)
    for n, value in values:
        name = value.lower()
        if name not in listed:
            found.append('%s:%d: profile CHRING_PROFILE_%s has no row in the profile table of '
                         'docs/design.md §2 (%s:%d): add "| `%s` | H(b) | width | label of point '
                         'i | equal positions | where it comes from |"'
                         % (HEADER, n, value, DESIGN, rows[-1][0] + 1, name))
    known = {v.lower() for _, v in values}
    for name, n in sorted(listed.items(), key=lambda x: x[1]):
        if name not in known:
            found.append('%s:%d: profile `%s` has a row in §2 but chring_profile_t has no '
                         'CHRING_PROFILE_%s' % (DESIGN, n, name, name.upper()))


def check_profile_lists(root, design, found):
    """docs/design.md §2's table is the one list of profiles: a line of another document (or of
    design.md outside §2) that names six or more profiles in backquotes (every one, in a tree of
    fewer) lists them by hand."""
    text = strip_comments('\n'.join(read_lines(root, HEADER)))
    m = re.search(r'typedef\s+enum\s*\{(.*?)\}\s*chring_profile_t\s*;', text, re.S)
    if not m:
        return
    profiles = {v.lower() for v in re.findall(r'\bCHRING_PROFILE_(\w+)', m.group(1))}
    span = section(design, 2) or (0, 0)
    docs = sorted(os.path.join('docs', f) for f in os.listdir(os.path.join(root, 'docs'))
                  if f.endswith('.md'))
    for rel in docs + ['README.md', 'CONTRIBUTING.md']:
        if not os.path.isfile(os.path.join(root, rel)):
            continue
        for i, line in enumerate(read_lines(root, rel)):
            if rel == DESIGN and span[0] <= i < span[1]:
                continue
            named = set()
            for quoted in re.findall(r'`([^`]+)`', line):
                named.update(w for w in re.findall(r'[\w-]+', quoted) if w in profiles)
            if len(named) >= min(6, len(profiles)):
                found.append('%s:%d: lists %d profiles by hand: link to the table of '
                             'docs/design.md §2 instead (programs write their lists from '
                             'chring_profile_info)'
                             % (rel, i + 1, len(named)))


def source_table(design):
    """{file of src/: (row, line)} from the table of docs/design.md §9 whose first column is
    "file" (files of one row share it), and the line of its last row."""
    span = section(design, 9)
    rows = table_after(design, span[0], span[1], 'file') if span else []
    ranks = {}
    for r, (i, cell) in enumerate(rows):
        for f in re.findall(r'`src/([\w.]+)`', cell):
            ranks.setdefault(f, (r, i + 1))
    return ranks, (rows[-1][0] + 1 if rows else (span[0] + 1 if span else 1))


def check_sources(root, design, found):
    """Every file of src/ has its row in docs/design.md §9's table of source files, and
    src/meson.build compiles them in the table's order."""
    ranks, last_row = source_table(design)
    src = os.path.join(root, 'src')
    if not os.path.isdir(src):
        return
    for f in sorted(os.listdir(src)):
        if f.endswith(('.c', '.h')) and f not in ranks:
            found.append('src/%s:1: not in the table of source files of docs/design.md §9 (%s:%d): '
                         'add "| `src/%s` | what it holds |" at its place in the chain'
                         % (f, DESIGN, last_row, f))
    try:
        meson = read_lines(root, 'src/meson.build')
    except FileNotFoundError:
        return
    inside, previous = False, None
    for i, line in enumerate(meson):
        if re.match(r'\s*chring_sources\s*=\s*files\(', line):
            inside = True
            continue
        if inside and line.strip().startswith(')'):
            break
        m = re.match(r"\s*'([\w.]+)',?\s*$", line) if inside else None
        if not m or m.group(1) not in ranks:
            continue
        if previous and ranks[m.group(1)][0] < ranks[previous][0]:
            found.append('src/meson.build:%d: %s comes after %s here but before it in the table '
                         'of docs/design.md §9 (%s:%d): give both one order'
                         % (i + 1, m.group(1), previous, DESIGN, ranks[m.group(1)][1]))
        previous = m.group(1)


# A function with a body, or a macro, that a file of src/ defines: what another file may use.
DEFINITION = re.compile(r'^(?:[A-Za-z_][\w \t*]*?\b)?(chring__\w+)\s*\([^;{]*\)\s*\{|'
                        r'^#\s*define\s+(chring__\w+|CHRING_\w+)', re.M)
# A top-level declaration (a prototype in column 0, ending at its semicolon) names, not uses.
PROTOTYPE = re.compile(r'^[A-Za-z_][^;{}#]*\bchring__\w+\s*\([^;{}]*\)\s*;', re.M)


def check_chain(root, design, found):
    """docs/design.md §9: each file of src/ uses only the files of its row and the rows before
    (its #includes, and the chring__ functions and the macros defined in another file)."""
    ranks, _ = source_table(design)
    src = os.path.join(root, 'src')
    texts = {}
    for f in sorted(os.listdir(src)):
        if f.endswith(('.c', '.h')):
            with open(os.path.join(src, f), encoding='utf-8') as fh:
                texts[f] = strip_comments(fh.read())
    defined = {}
    for f, text in texts.items():
        for m in DEFINITION.finditer(text):
            defined.setdefault(m.group(1) or m.group(2), f)
    for f, text in texts.items():
        if f not in ranks:
            continue
        text = PROTOTYPE.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text)
        told = set()
        for m in re.finditer(r'#\s*include\s+"([\w.]+)"|\b(chring__\w+|CHRING_\w+)\b', text):
            used = m.group(1) or defined.get(m.group(2))
            if used is None or used == f or used not in ranks or used in told:
                continue
            if ranks[used][0] > ranks[f][0]:
                told.add(used)
                what = ('includes %s' % used if m.group(1)
                        else 'uses %s of %s' % (m.group(2), used))
                found.append('src/%s:%d: %s, which the chain of docs/design.md §9 lists after it '
                             '(%s:%d)' % (f, line_of(text, m.start()), what, DESIGN,
                                          ranks[used][1]))


def check(root, chain=False):
    found = []
    design = read_lines(root, DESIGN)
    check_areas(root, design, found)
    check_api(root, design, found)
    check_errors(root, design, found)
    check_profiles(root, design, found)
    check_comments(root, found)
    check_profile_lists(root, design, found)
    check_sources(root, design, found)
    if chain:
        check_chain(root, design, found)
    return found


def self_test():
    """A whole tree passes; one omission of each kind planted in it is found, and nothing
    else."""
    import shutil
    import tempfile
    whole = {
        'Makefile': 'BUILD ?= build\nFORMAT_DIRS = include src\n',
        'meson.build': "project('x', 'c')\nsubdir('src')\n",
        '.gitignore': '/build*/\n',
        'build/junk.c': '',
        '_b/meson-private/x': '',
        '_b/vcc_if.c': '',
        'docs/x.md': '',
        'include/chring.h': (
            '/* chring_note: a comment, not a function: CHRING_API int chring_no(void); */\n'
            'typedef enum {\n'
            '    CHRING_PROFILE_HASH64 = 0, /* CHRING_PROFILE_NOT_ONE */\n'
            '    CHRING_PROFILE_FNV16\n'
            '} chring_profile_t;\n'
            '#define CHRING_VERSION_MAJOR 0\n'
            '/* The version.  Any thread. */\n'
            'CHRING_API const char *chring_version(void);\n'
            '/* Adds a member: -EINVAL for r or name NULL.  Writer side. */\n'
            'CHRING_API int chring_add(chring_t *r,\n'
            '                          const char *name);\n'),
        'src/errors.h': ('#define CHRING_ERRORS(X) \\\n    X(EINVAL, "bad") \\\n'
                         '    X(ENOENT, "none")\n'),
        'src/meson.build': "chring_sources = files(\n  'a.c',\n  'later.c',\n)\nx = files('b.c')\n",
        'src/later.c': 'int chring__from_later(void)\n{\n    return 1;\n}\n',
        'src/later.h': '#define CHRING_LATER 1\nint chring__later(void);\n'
                       'static inline int chring__later2(void) { return 0; }\n',
        'src/a.c': '#include "errors.h"\n',
        'tests/docs/check_citations.py': ("AREAS = ['src', 'include', 'docs', 'tests']\n"
                                          "PATH_ROOTS = ['src', 'include', 'docs', 'tests']\n"),
        'docs/design.md': (
            '# d\n\n## §2 Profiles\n\n'
            '| profile | H |\n|---|---|\n| `hash64` (default) | x |\n| `fnv16` | y |\n\n'
            '## §5 The C API conventions\n\n'
            '- **Results.** 0, or `-EINVAL`, `-ENOENT`.\n'
            '- **Threads.** `chring_gone` here is not the map.\n\n'
            '**The API in groups**:\n'
            '- *Version*: `chring_version`, `CHRING_VERSION_*`.\n'
            '- *Membership*: `chring_add`.\n\n'
            '## §9 Build\n\n'
            '| area | what |\n|---|---|\n| `include/chring.h` | the header |\n'
            '| `src/` | the library |\n| `docs/` | documents |\n| `tests/` | tests |\n\n'
            '| file | what |\n|---|---|\n| `tools/` | not the areas table |\n'
            '| `src/errors.h`, `src/a.c` | the first |\n'
            '| `src/later.h`, `src/later.c` | the second |\n'),
    }
    planted = {
        'vmod/v.c': '',
        'vmod/meson.build': '',
        'scripts/s.py': '',
        'include/chring.h': whole['include/chring.h'].replace(
            '    CHRING_PROFILE_FNV16\n', '    CHRING_PROFILE_FNV16,\n    CHRING_PROFILE_NEW\n') +
            '\nCHRING_API int chring_planted(const char *p);\n',
        'src/errors.h': whole['src/errors.h'] + '    X(EBUSY, "busy")\n',
        'docs/x.md': '`--profile P`: `hash64`, `fnv16`, `new` and more.\n',
        'src/b.c': '',
        'notes/n.md': '',
        'data/d.bin': '',
        'src/meson.build': "chring_sources = files(\n  'later.c',\n  'a.c',\n)\n",
    }
    want = [
        'data/: data has no row in the table of areas of docs/design.md §9 (docs/design.md:23): '
        'add "| `data/` | what it holds | what it may use | its document | its tests |"',
        'notes/: notes has no row in the table of areas of docs/design.md §9 (docs/design.md:23): '
        'add "| `notes/` | what it holds | what it may use | its document | its tests |"',
        "notes/: notes is not in AREAS of tests/docs/check_citations.py "
        "(tests/docs/check_citations.py:1): add 'notes'",
        "notes/: notes is not in PATH_ROOTS of tests/docs/check_citations.py "
        "(tests/docs/check_citations.py:2): add 'notes'",
        'scripts/: scripts has no row in the table of areas of docs/design.md §9 '
        '(docs/design.md:23): add "| `scripts/` | what it holds | what it may use | its document '
        '| its tests |"',
        "scripts/: scripts is not in AREAS of tests/docs/check_citations.py "
        "(tests/docs/check_citations.py:1): add 'scripts'",
        "scripts/: scripts is not in PATH_ROOTS of tests/docs/check_citations.py "
        "(tests/docs/check_citations.py:2): add 'scripts'",
        'vmod/: vmod has no row in the table of areas of docs/design.md §9 (docs/design.md:23): '
        'add "| `vmod/` | what it holds | what it may use | its document | its tests |"',
        "vmod/: vmod is not in AREAS of tests/docs/check_citations.py "
        "(tests/docs/check_citations.py:1): add 'vmod'",
        "vmod/: vmod is not in PATH_ROOTS of tests/docs/check_citations.py "
        "(tests/docs/check_citations.py:2): add 'vmod'",
        "vmod/: vmod/meson.build is not configured by the top meson.build: add subdir('vmod') "
        "under the option that builds it",
        'vmod/: vmod holds C but is not in FORMAT_DIRS (Makefile:2): add vmod',
        'include/chring.h:14: chring_planted is not in the API map of docs/design.md §5 ("The '
        'API in groups"): add `chring_planted` to the line of `chring_add` (docs/design.md:17), '
        'its neighbour in the header, or a group of its own',
        'src/errors.h:4: -EBUSY is not in the results list of docs/design.md §5 '
        '(docs/design.md:12, "Results."): add `-EBUSY` to its list of errno values',
        'include/chring.h:5: profile CHRING_PROFILE_NEW has no row in the profile table of '
        'docs/design.md §2 (docs/design.md:8): add "| `new` | H(b) | width | label of point i | '
        'equal positions | where it comes from |"',
        'include/chring.h:14: chring_planted has no thread rule in its header comment: say "Any '
        'thread.", "Reader side." or "Writer side." (docs/design.md §5, "Threads")',
        'include/chring.h:14: chring_planted takes a pointer but its header comment gives no NULL '
        'answer: say what it returns or does for each NULL argument (docs/design.md §5, "NULL")',
        'docs/x.md:1: lists 3 profiles by hand: link to the table of docs/design.md §2 instead '
        '(programs write their lists from chring_profile_info)',
        'src/b.c:1: not in the table of source files of docs/design.md §9 (docs/design.md:32): '
        'add "| `src/b.c` | what it holds |" at its place in the chain',
        'src/meson.build:3: a.c comes after later.c here but before it in the table of '
        'docs/design.md §9 (docs/design.md:31): give both one order',
    ]
    stale = {
        'docs/design.md': whole['docs/design.md'].replace(
            '`chring_add`.', '`chring_add`, `chring_gone`.').replace(
            '`-ENOENT`.', '`-ENOENT`, `-EGONE`.').replace(
            '| `fnv16` | y |', '| `fnv16` | y |\n| `gone` | z |'),
    }
    want_stale = [
        'docs/design.md:18: `chring_gone` is in the API map but include/chring.h does not '
        'declare it: mend or drop it',
        'docs/design.md:13: `-EGONE` is in the results list but not in src/errors.h: add it '
        'there first',
        'docs/design.md:9: profile `gone` has a row in §2 but chring_profile_t has no '
        'CHRING_PROFILE_GONE',
    ]
    chain = {
        'src/a.c': ('#include "errors.h"\n#include "later.h"\nint chring__from_later(void);\n\n'
                    'int a(void)\n{\n    return chring__from_later() + CHRING_LATER;\n}\n'),
    }
    want_chain = [
        'src/a.c:2: includes later.h, which the chain of docs/design.md §9 lists after it '
        '(docs/design.md:32)',
        'src/a.c:7: uses chring__from_later of later.c, which the chain of docs/design.md §9 '
        'lists after it (docs/design.md:32)',
    ]
    failed = 0
    for what, extra, expected, with_chain in (
            ('the whole tree', {}, [], True),
            ('one omission of each kind', planted, want, False),
            ('stale entries', stale, want_stale, False),
            ('a use of a later file (--chain)', chain, want_chain, True)):
        root = tempfile.mkdtemp()
        try:
            for rel, text in dict(whole, **extra).items():
                os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
                with open(os.path.join(root, rel), 'w', encoding='utf-8') as f:
                    f.write(text)
            found = check(root, with_chain)
        finally:
            shutil.rmtree(root)
        if found != expected:
            print('self-test, %s: found\n  %s\nwanted\n  %s' %
                  (what, '\n  '.join(found) or '(nothing)', '\n  '.join(expected) or '(nothing)'))
            failed = 1
        else:
            print('self-test, %s: %d found, as wanted' % (what, len(found)))
    return failed


def main():
    args = sys.argv[1:]
    if args == ['--self-test']:
        return self_test()
    chain = '--chain' in args
    args = [a for a in args if a != '--chain']
    here = os.path.dirname(os.path.abspath(__file__))
    root = args[0] if args else os.path.dirname(os.path.dirname(here))
    found = check(root, chain)
    for line in found:
        print(line)
    print('%d omission%s from the map' % (len(found), '' if len(found) == 1 else 's'))
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
