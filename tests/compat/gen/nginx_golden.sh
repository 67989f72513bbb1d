#!/bin/sh
# Regenerates the nginx golden maps in tests/compat/data from a real nginx (`hash $arg_k consistent`).
#
# Starts one nginx (Debian nginx-light or any build with the upstream hash module) from its own
# directory /tmp/chring-nginx-golden (fixed, because unix-socket member names carry the path), with:
#   backends  127.0.0.1:28081..28088, 127.0.0.1:80 (only if free) and two unix sockets, each
#             answering its own id;
#   fronts    127.0.0.1:28101.. one per membership: `upstream { hash $arg_k consistent; server ...; }`
#             and `proxy_pass`.
# Each key of keys.txt is asked of each front with curl (key -> backend id -> member name as written
# in the upstream block).  nginx is stopped by its pid at the end; the run is bounded by timeouts.
# Only 127.0.0.1 and unix sockets are used.  Run as root or as a user who may bind port 80 (without
# it the no-port memberships are skipped):  sh tests/compat/gen/nginx_golden.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data="$here/../data"
keys="$here/keys.txt"
dir=/tmp/chring-nginx-golden
nginx_bin=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}

rm -rf "$dir"
mkdir -p "$dir/logs" "$dir/tmp"

port80=0
if ! (ss -ltn 2>/dev/null | awk '{print $4}' | grep -q '^127.0.0.1:80$\|^0.0.0.0:80$\|^\*:80$\|^\[::\]:80$'); then
    port80=1
fi

# Memberships: name, then the upstream members as nginx config lines (";"-separated).
# The member name is what follows "server " up to the first blank: exactly what nginx hashes.
memberships="n2|127.0.0.1:28081;127.0.0.1:28082
n3|127.0.0.1:28081;127.0.0.1:28082;127.0.0.1:28083
n5|127.0.0.1:28081;127.0.0.1:28082;127.0.0.1:28083;127.0.0.1:28084;127.0.0.1:28085
n8|127.0.0.1:28081;127.0.0.1:28082;127.0.0.1:28083;127.0.0.1:28084;127.0.0.1:28085;127.0.0.1:28086;127.0.0.1:28087;127.0.0.1:28088
n8_minus4|127.0.0.1:28081;127.0.0.1:28082;127.0.0.1:28083;127.0.0.1:28085;127.0.0.1:28086;127.0.0.1:28087;127.0.0.1:28088
n8_down4|127.0.0.1:28081;127.0.0.1:28082;127.0.0.1:28083;127.0.0.1:28084 down;127.0.0.1:28085;127.0.0.1:28086;127.0.0.1:28087;127.0.0.1:28088
weighted|127.0.0.1:28081;127.0.0.1:28082 weight=2;127.0.0.1:28083;127.0.0.1:28084 weight=3
unix|unix:$dir/a.sock;UNIX:$dir/b.sock;127.0.0.1:28081"
if [ "$port80" = 1 ]; then
    memberships="$memberships
noport|127.0.0.1;127.0.0.1:28081;127.0.0.1:28082
port80|127.0.0.1:80;127.0.0.1:28081;127.0.0.1:28082"
else
    echo "nginx_golden: port 80 is taken, skipping the no-port memberships" >&2
fi

conf="$dir/nginx.conf"
{
    echo "worker_processes 1;"
    echo "pid $dir/nginx.pid;"
    echo "error_log $dir/logs/error.log warn;"
    echo "daemon on;"
    echo "events { worker_connections 256; }"
    echo "http {"
    echo "  access_log off;"
    echo "  client_body_temp_path $dir/tmp/body; proxy_temp_path $dir/tmp/proxy;"
    echo "  fastcgi_temp_path $dir/tmp/fcgi; uwsgi_temp_path $dir/tmp/uwsgi; scgi_temp_path $dir/tmp/scgi;"
    for p in 28081 28082 28083 28084 28085 28086 28087 28088; do
        echo "  server { listen 127.0.0.1:$p; location / { return 200 \"tcp$p\\n\"; } }"
    done
    if [ "$port80" = 1 ]; then
        echo "  server { listen 127.0.0.1:80; location / { return 200 \"tcp80\\n\"; } }"
    fi
    echo "  server { listen unix:$dir/a.sock; location / { return 200 \"sockA\\n\"; } }"
    echo "  server { listen unix:$dir/b.sock; location / { return 200 \"sockB\\n\"; } }"
    front=28101
    echo "$memberships" | while IFS='|' read -r name members; do
        echo "  upstream u_$name {"
        echo "    hash \$arg_k consistent;"
        echo "$members" | tr ';' '\n' | while read -r line; do echo "    server $line;"; done
        echo "  }"
        echo "  server { listen 127.0.0.1:$front; location / { proxy_pass http://u_$name; } }"
        front=$((front + 1))
    done
    echo "}"
} > "$conf"

"$nginx_bin" -t -q -e "$dir/logs/error.log" -p "$dir" -c "$conf"
"$nginx_bin" -e "$dir/logs/error.log" -p "$dir" -c "$conf"
pid=
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -s "$dir/nginx.pid" ] && pid=$(cat "$dir/nginx.pid") && break
    sleep 0.2
done
[ -n "$pid" ] || { echo "nginx_golden: nginx did not start" >&2; cat "$dir/logs/error.log" >&2; exit 1; }
cleanup() {
    kill "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
sleep 0.3

version=$("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //')
front=28101
echo "$memberships" | while IFS='|' read -r name members; do
    out="$data/nginx_$name.tsv"
    {
        echo "# generator: tests/compat/gen/nginx_golden.sh ($version, upstream u_$name { hash \$arg_k consistent; ... })"
        echo "# profile: nginx"
        # A member marked "down" keeps its points in nginx but is skipped at lookup; it is not a
        # member of the equivalent chring ring (removing it is the same thing).
        echo "$members" | tr ';' '\n' | while read -r server opts; do
            w=1
            case "$opts" in weight=*) w=${opts#weight=} ;; down) printf '# down (not a member): %s\n' "$server"; continue ;; esac
            printf '#member\t%s\t%s\n' "$server" "$w"
        done
    } > "$out"
    # backend id -> member name, for this membership
    echo "$members" | tr ';' '\n' | while read -r server opts; do
        case "$server" in
            unix:*|UNIX:*) case "$server" in *a.sock) id=sockA ;; *) id=sockB ;; esac ;;
            *:*) id="tcp${server##*:}" ;;
            *) id=tcp80 ;;
        esac
        printf '%s\t%s\n' "$id" "$server"
    done > "$dir/ids"
    # 100 URLs per curl process; one answer line per key, in order.
    sed "s|^|http://127.0.0.1:$front/?k=|" "$keys" \
        | xargs -n 100 timeout 60 curl -s --max-time 30 > "$dir/answers"
    [ "$(wc -l < "$dir/answers")" = "$(wc -l < "$keys")" ] \
        || { echo "nginx_golden: $name: short answers" >&2; exit 1; }
    paste "$keys" "$dir/answers" | awk -F '\t' -v ids="$dir/ids" '
        BEGIN { while ((getline line < ids) > 0) { split(line, f, "\t"); name[f[1]] = f[2] } }
        { if (!($2 in name)) { print "unknown backend " $2 > "/dev/stderr"; exit 1 } print $1 "\t" name[$2] }' >> "$out"
    echo "nginx_golden: $out"
    front=$((front + 1))
done
