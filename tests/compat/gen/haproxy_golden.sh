#!/bin/sh
# Regenerates the haproxy golden maps in tests/compat/data from a real HAProxy (Debian 12's haproxy
# 2.6: `balance url_param k` with `hash-type consistent [FUNCTION [avalanche]]`).
#
# Starts one haproxy (master-worker off, daemon, its own directory /tmp/chring-haproxy-golden),
# with:
#   servers  127.0.0.1:28201..28220: frontends answering 204 (no body) to anything (no health checks, so
#            every server that is not `disabled` is up);
#   fronts   127.0.0.1:28301.. one per variant, each with its own backend of `server` lines and
#            `http-response set-header X-Srv %[srv_id]`: the id of the server HAProxy chose,
#            which is the member name of the equivalent chring ring.
# Each key of keys.txt is asked of each front with curl (`/?k=<key>`; 100 URLs per curl process;
# every call bounded by a timeout).  haproxy is stopped by its pid at the end, also on failure.
# Only 127.0.0.1 is used.  Run:  sh tests/compat/gen/haproxy_golden.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data="$here/../data"
keys="$here/keys.txt"
dir=/tmp/chring-haproxy-golden
haproxy_bin=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}

rm -rf "$dir"
mkdir -p "$dir"

# Variants: name | hash-type arguments after "consistent" | server lines (";"-separated), each
# "PORT [haproxy server options]".  Servers are numbered by HAProxy in config order unless `id N`.
variants="n2||28201;28202
n3||28201;28202;28203
n5||28201;28202;28203;28204;28205
n8||28201;28202;28203;28204;28205;28206;28207;28208
n20||28201;28202;28203;28204;28205;28206;28207;28208;28209;28210;28211;28212;28213;28214;28215;28216;28217;28218;28219;28220
weighted||28201;28202 weight 2;28203;28204 weight 3
weighted_wide||28201 weight 1;28202 weight 10;28203 weight 100;28204 weight 256
n8_minus4_fixed||28201 id 1;28202 id 2;28203 id 3;28205 id 5;28206 id 6;28207 id 7;28208 id 8
n8_minus4_renumbered||28201;28202;28203;28205;28206;28207;28208
n8_disabled4||28201;28202;28203;28204 disabled;28205;28206;28207;28208
large_ids||28201 id 7;28202 id 1000;28203 id 65536;28204 id 1048575;28205 id 2147483647
colliding_ids||28201 id 1;28202 id 2;28203 id 1048577;28204 id 3
sdbm|sdbm|28201;28202;28203;28204;28205
sdbm_avalanche|sdbm avalanche|28201;28202;28203;28204;28205
djb2|djb2|28201;28202;28203;28204;28205
djb2_avalanche|djb2 avalanche|28201;28202;28203;28204;28205
wt6|wt6|28201;28202;28203;28204;28205
wt6_avalanche|wt6 avalanche|28201;28202;28203;28204;28205
crc32|crc32|28201;28202;28203;28204;28205
crc32_avalanche|crc32 avalanche|28201;28202;28203;28204;28205"

conf="$dir/haproxy.cfg"
{
    echo "global"
    echo "  daemon"
    echo "  pidfile $dir/haproxy.pid"
    echo "  maxconn 512"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 5s"
    echo "  timeout client 10s"
    echo "  timeout server 10s"
    p=28201
    while [ "$p" -le 28220 ]; do
        echo "frontend srv_$p"
        echo "  bind 127.0.0.1:$p"
        echo "  http-request return status 204"
        p=$((p + 1))
    done
    front=28301
    echo "$variants" | while IFS='|' read -r name htype servers; do
        echo "frontend f_$name"
        echo "  bind 127.0.0.1:$front"
        echo "  default_backend b_$name"
        echo "backend b_$name"
        echo "  balance url_param k"
        echo "  hash-type consistent $htype"
        echo "  http-response set-header X-Srv %[srv_id]"
        i=0
        echo "$servers" | tr ';' '\n' | while read -r port opts; do
            i=$((i + 1))
            echo "  server s$i 127.0.0.1:$port $opts"
        done
        front=$((front + 1))
    done
} > "$conf"

"$haproxy_bin" -c -q -f "$conf"
"$haproxy_bin" -f "$conf"
pid=
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -s "$dir/haproxy.pid" ] && pid=$(cat "$dir/haproxy.pid") && break
    sleep 0.2
done
[ -n "$pid" ] || { echo "haproxy_golden: haproxy did not start" >&2; exit 1; }
cleanup() {
    kill "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM
sleep 0.3

version=$("$haproxy_bin" -v 2>&1 | head -1 | sed 's/^HAProxy version \([^ ]*\).*/\1/')
front=28301
echo "$variants" | while IFS='|' read -r name htype servers; do
    out="$data/haproxy_$name.tsv"
    {
        echo "# generator: tests/compat/gen/haproxy_golden.sh (HAProxy $version, balance url_param k, hash-type consistent $htype)"
        echo "# profile: haproxy"
        case "$htype" in
            "") echo "# key-hash: default" ;;
            *) echo "# key-hash: $(echo "$htype" | tr ' ' '_')" ;;
        esac
        # Member names are HAProxy's server ids; a `disabled` server keeps its id but is no member.
        i=0
        echo "$servers" | tr ';' '\n' | while read -r port opts; do
            i=$((i + 1))
            id=$i w=1 off=0
            set -- $opts
            while [ $# -gt 0 ]; do
                case "$1" in
                    id) id=$2; shift ;;
                    weight) w=$2; shift ;;
                    disabled) off=1 ;;
                esac
                shift
            done
            if [ "$off" = 1 ]; then
                printf '# disabled (not a member): server s%s 127.0.0.1:%s id %s\n' "$i" "$port" "$id"
            else
                printf '#member\t%s\t%s\n' "$id" "$w"
            fi
        done
    } > "$out"
    sed "s|^|http://127.0.0.1:$front/?k=|" "$keys" \
        | xargs -n 100 timeout 60 curl -s --max-time 30 -w '%header{x-srv}\n' > "$dir/answers"
    [ "$(wc -l < "$dir/answers")" = "$(wc -l < "$keys")" ] \
        || { echo "haproxy_golden: $name: short answers" >&2; exit 1; }
    if grep -qv '^[0-9][0-9]*$' "$dir/answers"; then
        echo "haproxy_golden: $name: an answer without a server id" >&2; exit 1
    fi
    paste "$keys" "$dir/answers" >> "$out"
    echo "haproxy_golden: $out"
    front=$((front + 1))
done
