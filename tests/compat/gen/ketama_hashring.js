// Golden data from the npm `hashring` package (documentation: it is not normative for chring).
//
// hashring computes a member's digest count in double precision,
//   Math.floor(weight / total * 40 * members),
// where libmemcached (normative, docs/design.md §2.1) computes in single precision; the two
// disagree at some memberships (7, 14, 28 equal members: hashring 39 digests, libmemcached 40), and
// there the rings differ.  Elsewhere hashring, with member names "host:port" as given, is the same
// ring.
//
//   mkdir -p /tmp/hashring-npm && (cd /tmp/hashring-npm && npm install hashring)
//   NODE_PATH=/tmp/hashring-npm/node_modules node tests/compat/gen/ketama_hashring.js
'use strict';
const fs = require('fs');
const path = require('path');
const HashRing = require('hashring');
const version = require('hashring/package.json').version;

const data = path.join(__dirname, '..', 'data');
const keys = fs.readFileSync(path.join(__dirname, 'keys.txt'), 'utf8').split('\n').filter((k) => k.length > 0);

function range(from, to) {
  const out = [];
  for (let i = from; i <= to; i++) out.push(i);
  return out;
}

function writeMap(file, servers) {
  // servers: { "host:port": weight }
  const ring = new HashRing(servers, 'md5');
  const lines = [
    `# generator: tests/compat/gen/ketama_hashring.js (npm hashring ${version}, default options)`,
    '# profile: ketama',
  ];
  for (const name of Object.keys(servers)) lines.push(`#member\t${name}\t${servers[name]}`);
  for (const key of keys) lines.push(`${key}\t${ring.get(key)}`);
  fs.writeFileSync(path.join(data, file), lines.join('\n') + '\n');
}

function equal(n, prefix) {
  const servers = {};
  for (const i of range(1, n)) servers[`${prefix}${i}:11211`] = 1;
  return servers;
}

// Digest counts for 1..100 equal members, with hashring's own formula (vnode count 40).
const digestLines = [
  `# generator: tests/compat/gen/ketama_hashring.js (npm hashring ${version}, formula of HashRing.prototype.continuum)`,
  '# members\ttotal_weight\tweight\tdigests',
];
for (const n of range(1, 100)) digestLines.push(`${n}\t${n}\t1\t${Math.floor((1 / n) * 40 * n)}`);
fs.writeFileSync(path.join(data, 'hashring_digests.tsv'), digestLines.join('\n') + '\n');

writeMap('hashring_n3.tsv', equal(3, '10.0.1.'));
writeMap('hashring_n7.tsv', equal(7, '10.0.1.'));
writeMap('hashring_weighted.tsv', {
  '10.0.1.1:11211': 1, '10.0.1.2:11211': 3, '10.0.1.3:11211': 1, '10.0.1.4:11211': 2, '10.0.1.5:11211': 1,
});
