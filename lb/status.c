/* chring-lb: the stats listener and the status page.
 *
 * SPDX-License-Identifier: MIT
 *
 * Every /_chring/ path is the balancer's own: GET /_chring/stats (JSON, stats.c) and GET
 * /_chring/ (one self-contained HTML page, no external asset, that draws the ring and every
 * member's load from the JSON, refreshed each second).  By default they are answered on the main
 * listener, by the worker that got the request, to peers in --stats-allow (loopback by default).
 * With --stats-listen they are answered only there, by the main thread's event loop (the one that
 * applies membership changes), so a stats request never takes a worker's time, and the main
 * listener answers them 404.
 */
#define _GNU_SOURCE
#include "lb.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* --stats-allow                                                                               */

struct cidr {
    int family;
    unsigned char addr[16];
    unsigned bits;
};

#define MAX_CIDRS 64
static struct cidr allow[MAX_CIDRS];
static size_t nallow;
static bool allow_any;

static int parse_cidr(const char *s, size_t len, struct cidr *c)
{
    char buf[INET6_ADDRSTRLEN + 8];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        char *end;
        *slash = '\0';
        bits = strtol(slash + 1, &end, 10);
        if (*end || end == slash + 1)
            return -1;
    }
    if (inet_pton(AF_INET, buf, c->addr) == 1) {
        c->family = AF_INET;
        if (bits < 0)
            bits = 32;
        if (bits > 32)
            return -1;
    } else if (inet_pton(AF_INET6, buf, c->addr) == 1) {
        c->family = AF_INET6;
        if (bits < 0)
            bits = 128;
        if (bits > 128)
            return -1;
    } else {
        return -1;
    }
    c->bits = (unsigned)bits;
    return 0;
}

int lb_stats_allow_parse(const char *list)
{
    nallow = 0;
    allow_any = false;
    if (!list)
        list = "127.0.0.0/8,::1";
    if (strcmp(list, "any") == 0) {
        allow_any = true;
        return 0;
    }
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (nallow == MAX_CIDRS || parse_cidr(p, len, &allow[nallow]) < 0) {
            fprintf(stderr,
                    "chring-lb: --stats-allow %s: 'any' or up to %d CIDRs (a.b.c.d/n, "
                    "x::y/n) separated by commas\n",
                    list, MAX_CIDRS);
            return -1;
        }
        nallow++;
        p = e ? e + 1 : p + len;
    }
    return nallow ? 0 : -1;
}

static bool prefix_match(const unsigned char *a, const unsigned char *b, unsigned bits)
{
    unsigned full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

static bool peer_allowed(struct lb_req *req)
{
    if (allow_any)
        return true;
    const char *peer = req->peer;
    unsigned char a4[4], a6[16];
    bool v4 = inet_pton(AF_INET, peer, a4) == 1;
    bool v6 = !v4 && inet_pton(AF_INET6, peer, a6) == 1;
    if (v6 && memcmp(a6, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) { /* IPv4-mapped */
        memcpy(a4, a6 + 12, 4);
        v4 = true;
        v6 = false;
    }
    for (size_t i = 0; i < nallow; i++) {
        if (v4 && allow[i].family == AF_INET && prefix_match(a4, allow[i].addr, allow[i].bits))
            return true;
        if (v6 && allow[i].family == AF_INET6 && prefix_match(a6, allow[i].addr, allow[i].bits))
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* the status page                                                                             */

/* The page, in pieces below the 4095 bytes ISO C guarantees for one string literal. */
static const char *const page[] = {
    "<!DOCTYPE html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>chring-lb status</title>\n"
    "<style>\n"
    ":root{--bg:#f6f7f9;--fg:#1d2330;--mute:#687085;--card:#fff;--line:#dfe3ea;--bad:#c62828;"
    "--warn:#b26a00;--ok:#2e7d32}\n"
    "*{box-sizing:border-box}body{margin:0;font:14px/1.4 system-ui,-apple-system,'Segoe UI',"
    "Roboto,sans-serif;background:var(--bg);color:var(--fg)}\n"
    "header{display:flex;align-items:baseline;gap:16px;padding:14px 22px;background:#1d2330;"
    "color:#fff}header h1{font-size:18px;margin:0;font-weight:600}header .sub{color:#aab3c5}\n"
    "#live{margin-left:auto;font-size:12px;color:#aab3c5}#live.stale{color:#ff8a80}\n"
    "main{display:grid;grid-template-columns:minmax(300px,380px) 1fr;gap:18px;padding:18px 22px}\n"
    ".card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px}\n"
    ".card h2{font-size:13px;text-transform:uppercase;letter-spacing:.05em;color:var(--mute);"
    "margin:0 0 10px}\n"
    "#ring{width:100%;height:auto;display:block}\n"
    ".kpis{display:grid;grid-template-columns:repeat(4,1fr);gap:8px;margin-top:12px}\n"
    ".kpi{background:var(--bg);border-radius:6px;padding:8px}.kpi b{display:block;font-size:18px;"
    "font-variant-numeric:tabular-nums}.kpi span{font-size:11px;color:var(--mute)}\n"
    "table{width:100%;border-collapse:collapse;font-variant-numeric:tabular-nums}\n"
    "th{text-align:left;font-size:11px;text-transform:uppercase;color:var(--mute);font-weight:600;"
    "padding:6px 8px;border-bottom:1px solid var(--line)}\n"
    "td{padding:7px 8px;border-bottom:1px solid var(--line);vertical-align:middle;"
    "white-space:nowrap}th{white-space:nowrap}\n"
    "td.num{text-align:right}th.num{text-align:right}\n"
    ".sw{display:inline-block;width:11px;height:11px;border-radius:3px;margin-right:7px;"
    "vertical-align:-1px}\n"
    ".bar{position:relative;height:16px;background:#eef0f4;border-radius:4px;min-width:140px;"
    "overflow:hidden}\n"
    ".bar i{position:absolute;left:0;top:0;bottom:0;background:#4f7cff;border-radius:4px}\n"
    ".bar i.full{background:var(--bad)}.bar em{position:absolute;right:6px;top:0;font-size:11px;"
    "font-style:normal;line-height:16px;color:#333}.bar i.full~em{color:#fff}\n"
    ".badge{font-size:11px;padding:1px 7px;border-radius:10px;font-weight:600}\n"
    ".up{background:#e3f3e5;color:var(--ok)}.down{background:#fde4e4;color:var(--bad)}"
    ".warming{background:#fff1d6;color:var(--warn)}\n"
    "tr.is-down td{color:var(--mute)}\n"
    ".foot{grid-column:1/-1;color:var(--mute);font-size:12px}\n"
    "#error{color:var(--bad)}\n"
    "</style></head><body>\n"
    "<header><h1>chring-lb</h1><span class=\"sub\" id=\"summary\">loading&hellip;</span>"
    "<span id=\"live\">&ndash;</span></header>\n"
    "<main>\n"
    "<section class=\"card\"><h2>Ring</h2>\n"
    "<svg id=\"ring\" viewBox=\"0 0 300 300\" role=\"img\" aria-label=\"the ring\"></svg>\n"
    "<div class=\"kpis\">\n",
    "<div class=\"kpi\"><b id=\"k-rate\">&ndash;</b><span>requests/s</span></div>\n"
    "<div class=\"kpi\"><b id=\"k-leases\">&ndash;</b><span>in flight (m)</span></div>\n"
    "<div class=\"kpi\"><b id=\"k-spills\">&ndash;</b><span>spills</span></div>\n"
    "<div class=\"kpi\"><b id=\"k-acquires\">&ndash;</b><span>acquires</span></div>\n"
    "</div></section>\n"
    "<section class=\"card\"><h2>Members</h2>\n"
    "<table><thead><tr><th>member</th><th>state</th><th class=\"num\">weight</th>"
    "<th class=\"num\">share</th><th>load / capacity</th><th class=\"num\">acquires</th>"
    "<th class=\"num\">spilled in</th><th class=\"num\">failures</th></tr></thead>\n"
    "<tbody id=\"members\"></tbody></table>\n"
    "<p id=\"error\"></p></section>\n"
    "<p class=\"foot\" id=\"foot\"></p>\n"
    "</main>\n"
    "<script>\n"
    "'use strict';\n"
    "const COLORS=['#4f7cff','#f28e2b','#59a14f','#e15759','#76b7b2','#edc948','#b07aa1',"
    "'#ff9da7','#9c755f','#8cd17d','#499894','#d37295'];\n"
    "const $=id=>document.getElementById(id);\n"
    "let prev=null,refreshes=0,history=[];\n"
    "function el(tag,attrs,text){const e=document.createElementNS("
    "tag==='svg'||attrs&&attrs.svg?'http://www.w3.org/2000/svg':'http://www.w3.org/1999/"
    "xhtml',tag);"
    "for(const k in attrs||{})if(k!=='svg')e.setAttribute(k,attrs[k]);"
    "if(text!==undefined)e.textContent=text;return e}\n"
    "function color(i,m){return m.down?'#b8bec9':COLORS[i%COLORS.length]}\n"
    "function arcPath(a0,a1,r0,r1){const cx=150,cy=150,f=a=>[Math.sin(a),-Math.cos(a)];"
    "const[s0,c0]=f(a0),[s1,c1]=f(a1),big=a1-a0>Math.PI?1:0;"
    "return`M${cx+r1*s0} ${cy+r1*c0}A${r1} ${r1} 0 ${big} 1 ${cx+r1*s1} ${cy+r1*c1}`+"
    "`L${cx+r0*s1} ${cy+r0*c1}A${r0} ${r0} 0 ${big} 0 ${cx+r0*s0} ${cy+r0*c0}Z`}\n"
    "function drawRing(st){const svg=$('ring');svg.textContent='';const ring=st.ring,"
    "arcs=ring.arcs||[],n=ring.arcs_of||720,ms=st.members;"
    "svg.appendChild(el('circle',{svg:1,cx:150,cy:150,r:118,fill:'none',stroke:'#eef0f4',"
    "'stroke-width':34}));"
    "for(let i=0;i<arcs.length;i++){const a=arcs[i],end=i+1<arcs.length?arcs[i+1][0]:n;"
    "const m=ms[a[1]];if(!m)continue;const a0=a[0]/n*2*Math.PI,a1=end/n*2*Math.PI;"
    "const p=el('path',{svg:1,d:arcPath(a0,Math.min(a1,a0+2*Math.PI-1e-6),101,135),"
    "fill:color(a[1],m),stroke:color(a[1],m),'stroke-width':0.6,class:'arc',"
    "'data-member':m.name});"
    "if(m.scale<1&&!m.down)p.setAttribute('fill-opacity',String(0.35+0.65*m.scale));"
    "svg.appendChild(p)}"
    "const c=el('text',{svg:1,x:150,y:142,'text-anchor':'middle','font-size':30,"
    "'font-weight':600,fill:'#1d2330',id:'ring-members'},String(ring.members));"
    "svg.appendChild(c);svg.appendChild(el('text',{svg:1,x:150,y:164,'text-anchor':'middle',"
    "'font-size':12,fill:'#687085'},'members, '+ring.points+' points'));"
    "svg.appendChild(el('text',{svg:1,x:150,y:182,'text-anchor':'middle','font-size':12,"
    "fill:'#687085'},ring.profile+', c = '+ring.balance))}\n",
    "function state(m){if(m.down)return['down','down'];if(m.scale<1)return['warming',"
    "'warming '+Math.round(m.scale*100)+'%'];return['up','up']}\n"
    "function drawMembers(st){const tb=$('members');tb.textContent='';"
    "st.members.forEach((m,i)=>{const[cls,label]=state(m);"
    "const tr=el('tr',{class:'member'+(m.down?' is-down':''),'data-name':m.name,"
    "'data-load':m.load,'data-capacity':m.capacity,'data-acquires':m.acquires,'data-state':cls});"
    "const name=el('td');const sw=el('span',{class:'sw',style:'background:'+color(i,m)});"
    "name.appendChild(sw);name.appendChild(document.createTextNode(m.name));tr.appendChild(name);"
    "const s=el('td');s.appendChild(el('span',{class:'badge '+cls},label));tr.appendChild(s);"
    "tr.appendChild(el('td',{class:'num'},String(m.weight)));"
    "tr.appendChild(el('td',{class:'num'},(m.share*100).toFixed(1)+'%'));"
    "const b=el('td'),bar=el('div',{class:'bar'}),cap=Math.max(m.capacity,1);"
    "const fill=el('i',{class:m.load>=m.capacity&&m.load>0?'full':'',"
    "style:'width:'+Math.min(100,m.load/cap*100)+'%'});"
    "bar.appendChild(fill);bar.appendChild(el('em',{},m.load+' / '+m.capacity));"
    "b.appendChild(bar);tr.appendChild(b);"
    "tr.appendChild(el('td',{class:'num acq'},String(m.acquires)));"
    "tr.appendChild(el('td',{class:'num'},String(m.spilled_in)));"
    "tr.appendChild(el('td',{class:'num'},String(m.failures||0)));tb.appendChild(tr)})}\n"
    "function render(st,t){const r=st.ring,b=st.balancer;refreshes++;"
    "let rate='\\u2013';if(prev&&t>prev.t)rate=Math.round((b.requests-prev.b.requests)*1000/"
    "(t-prev.t)).toString();prev={t:t,b:b};history.push(r.acquires);"
    "if(history.length>20)history.shift();"
    "$('summary').textContent=r.members+' members \\u00b7 version '+r.version+' \\u00b7 '+"
    "b.threads+' threads \\u00b7 '+st.limits.conns+' connections';"
    "$('k-rate').textContent=rate;$('k-leases').textContent=r.leases;"
    "$('k-spills').textContent=r.spills;$('k-acquires').textContent=r.acquires;"
    "drawRing(st);drawMembers(st);const live=$('live');live.className='';"
    "live.textContent='live \\u00b7 updated '+new Date().toLocaleTimeString()+"
    "' \\u00b7 refresh '+refreshes;live.dataset.refreshes=refreshes;"
    "live.dataset.history=history.join(',');"
    "$('foot').textContent='proxied '+b.proxied+' \\u00b7 retries '+b.retries+' \\u00b7 502 '+"
    "b.bad_gateway+' \\u00b7 503 '+b.no_backend+' \\u00b7 parked connections '+"
    "st.limits.conns_parked+' \\u00b7 refused: requests '+st.limits.requests_refused+', bodies '+"
    "st.limits.body_refused+' \\u00b7 buffered body bytes '+st.limits.body_bytes;"
    "$('error').textContent=''}\n"
    "async function refresh(){try{const r=await fetch('stats',{cache:'no-store'});"
    "if(!r.ok)throw new Error('stats answered '+r.status);render(await r.json(),Date.now())}"
    "catch(e){$('live').className='stale';$('error').textContent=String(e)}}\n"
    "refresh();setInterval(refresh,1000);\n"
    "</script></body></html>\n",
};

static void serve_page(struct lb_req *req)
{
    enum evhttp_cmd_type cmd = req->cmd;
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        lb_send_text(req, 405, "Method Not Allowed", "GET only");
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        lb_send_text(req, 500, "Internal Server Error", "out of memory");
        return;
    }
    for (size_t i = 0; i < sizeof page / sizeof page[0]; i++)
        evbuffer_add_reference(b, page[i], strlen(page[i]), NULL, NULL);
    struct evkeyvalq *oh = req->out;
    evhttp_add_header(oh, "Content-Type", "text/html; charset=utf-8");
    evhttp_add_header(oh, "Cache-Control", "no-store");
    /* The page needs nothing from elsewhere: forbid everything else. */
    evhttp_add_header(oh, "Content-Security-Policy",
                      "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                      "connect-src 'self'; img-src 'self'");
    lb_req_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* routing and the stats listener                                                              */

void lb_status_route(struct worker *w, struct lb_req *req, const char *path)
{
    if (w && lb_cfg.stats_port != 0) {
        lb_send_text(req, 404, "Not Found", "not found");
        return;
    }
    if (!peer_allowed(req)) {
        lb_send_text(req, 403, "Forbidden", "not allowed (--stats-allow)");
        return;
    }
    if (!lb_stats_host_allowed(evhttp_find_header(req->in, "Host"),
                               w == NULL)) {
        lb_send_text(req, 421, "Misdirected Request", "Host not allowed for /_chring/");
        return;
    }
    if (strcmp(path, "/_chring/stats") == 0)
        lb_stats_serve(w, req);
    else if (strcmp(path, "/_chring/") == 0)
        serve_page(req);
    else
        lb_send_text(req, 404, "Not Found", "not found");
}

static struct evconnlistener *stats_listener;
static struct event *stats_backoff_ev;

/* Out of descriptors on the stats listener: accepting pauses for a second (as the workers'
 * listeners back off, limits.c), instead of spinning on the main thread. */
static void on_stats_backoff_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (stats_listener)
        evconnlistener_enable(stats_listener);
}

static void on_stats_accept_error(struct evconnlistener *listener, void *arg)
{
    (void)arg;
    static const struct timeval second = {1, 0};
    evconnlistener_disable(listener);
    if (stats_backoff_ev)
        event_add(stats_backoff_ev, &second);
}

static void on_stats_request(struct worker *w, struct lb_req *req)
{
    (void)w;
    const char *path = req->path;
    if (strcmp(path, "/_chring") == 0) {
        evhttp_add_header(req->out, "Location", "/_chring/");
        lb_send_text(req, 301, "Moved Permanently", "/_chring/");
    } else if (strncmp(path, "/_chring/", 9) == 0) {
        lb_status_route(NULL, req, path);
    } else {
        lb_send_text(req, 404, "Not Found", "not found: see /_chring/");
    }
}

int lb_status_start(struct event_base *base)
{
    if (lb_cfg.stats_port == 0)
        return 0;
    int fd = lb_listen_on(lb_cfg.stats_host, lb_cfg.stats_port, false);
    if (fd >= 0) {
        stats_listener = lb_server_listen(base, fd, NULL, on_stats_request);
        if (!stats_listener)
            close(fd);
    }
    stats_backoff_ev = evtimer_new(base, on_stats_backoff_end, NULL);
    if (!stats_listener || !stats_backoff_ev) {
        lb_log("--stats-listen %s:%u: cannot listen", lb_cfg.stats_host, lb_cfg.stats_port);
        lb_status_stop();
        return -1;
    }
    evconnlistener_set_error_cb(stats_listener, on_stats_accept_error);
    lb_log("stats and status page on http://%s:%u/_chring/", lb_cfg.stats_host, lb_cfg.stats_port);
    return 0;
}

void lb_status_stop(void)
{
    if (stats_listener)
        evconnlistener_free(stats_listener);
    stats_listener = NULL;
    lb_server_close_all(NULL);
    if (stats_backoff_ev)
        event_free(stats_backoff_ev);
    stats_backoff_ev = NULL;
}
