// coord console: the browser side of /ui/ (see docs/spec console-api.md).
//
// Plain ES2020, no framework, no external resources. It must run under
// `Content-Security-Policy: default-src 'self'`, so: no inline scripts or
// styles, no event-handler attributes, no eval. Every piece of server data
// (node names, paths, data, ids) reaches the page through textContent or
// attribute values set with setAttribute, never through innerHTML.
//
// Sections: helpers, api, sign-in, router, live events, tree, search,
// node view, dialogs, node actions, cluster, sessions, boot.
'use strict';

(() => {

  // ===================================================================
  // Helpers
  // ===================================================================

  const $ = (id) => document.getElementById(id);

  /** el('li', {class: 'x', 'data-path': p, text: 'name'}, child, ...) builds an element. */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const c of children) {
      if (c == null || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  const SVGNS = 'http://www.w3.org/2000/svg';
  /** svg('line', {x1: 0, ...}) builds an SVG element. */
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    for (const c of children) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'class') e.setAttribute('class', v);
      else if (k === 'hidden') e.hidden = !!v;
      else if (k === 'disabled') e.disabled = !!v;
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function setText(id, text) { const e = typeof id === 'string' ? $(id) : id; e.textContent = text == null ? '' : String(text); }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function show(e, on) { (typeof e === 'string' ? $(e) : e).hidden = !on; }
  function showError(id, text) { const e = $(id); e.textContent = text || ''; e.hidden = !text; }

  // --- paths and routes ----------------------------------------------
  function parentPath(p) {
    if (p === '/') return null;
    const i = p.lastIndexOf('/');
    return i <= 0 ? '/' : p.slice(0, i);
  }
  function baseName(p) { return p === '/' ? '/' : p.slice(p.lastIndexOf('/') + 1); }
  function joinPath(parent, name) { return parent === '/' ? '/' + name : parent + '/' + name; }
  /** The ancestors of p from / down, without p itself. */
  function ancestors(p) {
    const out = [];
    for (let a = parentPath(p); a != null; a = parentPath(a)) out.unshift(a);
    return out;
  }
  /** #/tree/a/b for /a/b; each segment percent-encoded. */
  function treeHash(p) {
    if (p === '/') return '#/tree/';
    return '#/tree/' + p.slice(1).split('/').map(encodeURIComponent).join('/');
  }
  function decodeSeg(s) { try { return decodeURIComponent(s); } catch { return s; } }
  const q = encodeURIComponent;

  // --- bytes ---------------------------------------------------------
  const utf8 = new TextEncoder();
  const utf8Strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const utf8Loose = new TextDecoder('utf-8', { ignoreBOM: true });

  function b64ToBytes(s) {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function bytesToB64(b) {
    let s = '';
    for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
    return btoa(s);
  }
  /** The bytes as UTF-8 text, or null when they are not valid UTF-8. */
  function strictText(b) { try { return utf8Strict.decode(b); } catch { return null; } }
  function sameBytes(a, b) {
    if (a === b) return true;
    if (a == null || b == null || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  const HEX_LIMIT = 256 * 1024;
  /** hexdump -C style: offset, 16 bytes in two groups, |ascii|. */
  function hexdump(b) {
    const n = Math.min(b.length, HEX_LIMIT);
    const lines = [];
    for (let off = 0; off < n; off += 16) {
      let hex = '', asc = '';
      for (let i = 0; i < 16; i++) {
        if (i === 8) hex += ' ';
        if (off + i < n) {
          const c = b[off + i];
          hex += c.toString(16).padStart(2, '0') + ' ';
          asc += c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : '.';
        } else hex += '   ';
      }
      lines.push(off.toString(16).padStart(8, '0') + '  ' + hex + ' |' + asc + '|');
    }
    if (b.length > n) lines.push(`… ${b.length - n} more bytes not shown`);
    else lines.push(b.length.toString(16).padStart(8, '0'));
    return lines.join('\n');
  }

  // --- numbers and times ---------------------------------------------
  function fmtBytes(n) {
    if (n == null) return '';
    if (n < 1024) return n + ' B';
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
    return (n / 1048576).toFixed(1) + ' MiB';
  }
  const pad2 = (n) => String(n).padStart(2, '0');
  function fmtTime(ms) {
    if (!ms) return '—';
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }
  function fmtClock(ms) { const d = new Date(ms); return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`; }
  function fmtDuration(ms) {
    const s = Math.round(Math.abs(ms) / 1000);
    if (s < 60) return s + ' s';
    const m = Math.round(s / 60);
    if (m < 60) return m + ' min';
    const h = Math.round(m / 60);
    if (h < 48) return h + ' h';
    return Math.round(h / 24) + ' days';
  }
  function relTime(ms) {
    if (!ms) return '';
    const d = Date.now() - ms;
    if (Math.abs(d) < 5000) return 'just now';
    return d > 0 ? fmtDuration(d) + ' ago' : 'in ' + fmtDuration(d);
  }
  /** A span that the relative-time ticker keeps current. */
  function relSpan(ms) { return el('span', { class: 'reltime muted', 'data-ms': ms, text: `(${relTime(ms)})` }); }
  function tickRelTimes() {
    for (const e of document.querySelectorAll('.reltime[data-ms]')) e.textContent = `(${relTime(Number(e.dataset.ms))})`;
  }
  function fmtNum(x, digits) {
    if (x == null || Number.isNaN(x)) return '—';
    if (digits != null) return Number(x).toFixed(digits);
    return String(x);
  }

  function debounce(fn, ms) {
    let t = null;
    const d = (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
    d.cancel = () => clearTimeout(t);
    return d;
  }

  // --- global status line (aria-live) ---------------------------------
  let statusTimer = null;
  function status(text, kind) {
    const s = $('status');
    s.textContent = text;
    s.className = 'status' + (kind ? ' ' + kind : '') + (text ? ' on' : '');
    clearTimeout(statusTimer);
    if (text) statusTimer = setTimeout(() => { s.textContent = ''; s.className = 'status'; }, 8000);
  }

  // ===================================================================
  // API: fetch wrapper, CSRF, errors
  // ===================================================================

  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }
  const STATUS_CODES = { 400: 'BadArguments', 401: 'Unauthenticated', 403: 'Forbidden', 404: 'NoNode', 409: 'Conflict', 413: 'TooLarge', 503: 'Unavailable' };

  const state = {
    me: null,          // Me from /ui/api/me or login; null when signed out
    csrf: '',
    view: null,        // 'tree' | 'cluster' | 'sessions'
    es: null,          // the EventSource
    esRetry: null,
  };

  /**
   * api('/ui/api/node?path=/a') -> parsed JSON. Options: method, body (object
   * or string), raw (return the Response), csrf (override the header),
   * noExpire (a 401 does not end the sign-in, e.g. for /me and login).
   * Errors throw ApiError {status, code, message}.
   */
  async function api(url, opt = {}) {
    const method = opt.method || (opt.body !== undefined ? 'POST' : 'GET');
    const init = { method, credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } };
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      init.headers['X-Coord-CSRF'] = opt.csrf || state.csrf;
      init.body = typeof opt.body === 'string' ? opt.body : JSON.stringify(opt.body ?? {});
    }
    let res;
    try {
      res = await fetch(url, init);
    } catch (e) {
      throw new ApiError(0, 'ConnectionLoss', 'Cannot reach the server (' + e.message + ').');
    }
    if (res.ok) {
      if (opt.raw) return res;
      const t = await res.text();
      if (!t) return {};
      try { return JSON.parse(t); } catch { throw new ApiError(res.status, 'BadResponse', 'The server sent something that is not JSON.'); }
    }
    let info = {};
    try { info = await res.json(); } catch { /* not JSON */ }
    const err = new ApiError(res.status, info.code || STATUS_CODES[res.status] || 'HTTP' + res.status,
      info.error || res.statusText || 'HTTP ' + res.status);
    if (res.status === 401 && !opt.noExpire) signinExpired();
    throw err;
  }
  const post = (url, body, opt) => api(url, Object.assign({ method: 'POST', body }, opt));

  /** A sentence for an error, for the status line and messages. */
  function errText(e) {
    if (!(e instanceof ApiError)) return String(e && e.message || e);
    switch (e.code) {
      case 'NoAuth': return 'Not allowed: ' + e.message;
      case 'ConnectionLoss': case 'Unavailable': return 'The server is unavailable: ' + e.message;
      default: return e.message + (e.code ? ` (${e.code})` : '');
    }
  }

  // ===================================================================
  // Sign-in and sign-out
  // ===================================================================

  function showSignin(message, notice) {
    const wasIn = !!state.me;
    state.me = null;
    state.csrf = '';
    stopEverything();
    $('app').hidden = true;
    $('app').removeAttribute('data-ready');
    $('signin').hidden = false;
    showError('login-error', message || '');
    const n = $('login-notice');
    n.textContent = notice || '';
    n.hidden = !notice;
    $('login-user').value = '';
    $('login-password').value = '';
    setBusy(false);
    if (wasIn || !document.activeElement || document.activeElement === document.body) $('login-user').focus();
    document.title = 'Sign in · coord console';
  }

  /** Any 401 from the API: the sign-in is gone. */
  function signinExpired() {
    if (!state.me) return;
    showSignin('Your sign-in expired. Please sign in again.');
  }

  function setBusy(on) {
    $('login-submit').disabled = on;
    $('login-anonymous').disabled = on;
  }

  async function login(user, password) {
    showError('login-error', '');
    setBusy(true);
    try {
      const me = await post('/ui/api/login', { user, password }, { csrf: 'login', noExpire: true });
      startApp(me);
    } catch (e) {
      setBusy(false);
      showError('login-error', e.status === 401 ? 'Sign-in refused: ' + e.message : errText(e));
    }
  }

  async function logout() {
    closeEvents(); // the server ends the stream; that is not an expiry
    try { await post('/ui/api/logout', {}, { noExpire: true }); } catch { /* signed out anyway */ }
    if (location.hash && !location.hash.startsWith('#/tree')) history.replaceState(null, '', '#/tree/');
    showSignin('', 'You signed out.');
  }

  function startApp(me) {
    state.me = me;
    state.csrf = me.csrf || '';
    $('signin').hidden = true;
    $('app').hidden = false;
    $('app').removeAttribute('data-ready');
    setText('whoami', me.user || 'anonymous');
    $('whoami').title = (me.identities || []).map((i) => i.scheme + ':' + i.id).join(', ') || 'world:anyone only';
    show('whoami-admin', !!me.admin);
    setText('whoami-server', me.server ? 'on ' + me.server : '');
    show('nav-sessions', !!me.admin);
    document.body.classList.toggle('is-admin', !!me.admin);
    resetTree();
    resetNodeView();
    resetSearch();
    connectEvents();
    route();
  }

  /** Re-reads /ui/api/me (the sign-in's session id changes when it is reopened). */
  async function refreshMe() {
    try {
      const me = await api('/ui/api/me');
      if (state.me) { Object.assign(state.me, me); if (me.csrf) state.csrf = me.csrf; }
    } catch { /* a 401 shows the sign-in */ }
  }

  function stopEverything() {
    closeEvents();
    stopCluster();
    stopSessions();
    closeAllDialogs();
  }

  // ===================================================================
  // Router: #/tree/<path>, #/cluster, #/sessions
  // ===================================================================

  function parseRoute() {
    const h = location.hash || '';
    if (h === '#/cluster' || h.startsWith('#/cluster/')) return { view: 'cluster' };
    if (h === '#/sessions' || h.startsWith('#/sessions/')) return { view: 'sessions' };
    if (h.startsWith('#/tree')) {
      const rest = h.slice('#/tree'.length).split('/').filter((s) => s !== '').map(decodeSeg);
      return { view: 'tree', path: '/' + rest.join('/') };
    }
    return { view: 'tree', path: '/' };
  }

  let routeSeq = 0;
  async function route() {
    if (!state.me) return;
    const seq = ++routeSeq;
    const r = parseRoute();
    if (r.view === 'tree' && nv.path != null && r.path !== nv.path && nodeDirty()) {
      const ok = await confirmAction(`You have unsaved edits to ${nv.path}. Discard them and open ${r.path}?`,
        { title: 'Unsaved edits', ok: 'Discard edits' });
      if (seq !== routeSeq || !state.me) return;
      if (!ok) { history.replaceState(null, '', treeHash(nv.path)); return; }
    }
    setView(r.view);
    try {
      if (r.view === 'tree') await showTreeView(r.path);
      else if (r.view === 'cluster') await startCluster();
      else await startSessions();
    } catch (e) {
      if (!state.me) return;
      status(errText(e), 'error');
    }
    if (seq === routeSeq && state.me && !$('app').hasAttribute('data-ready')) $('app').setAttribute('data-ready', '1');
  }

  function setView(view) {
    if (state.view !== view) {
      if (state.view === 'cluster') stopCluster();
      if (state.view === 'sessions') stopSessions();
    }
    state.view = view;
    show('view-tree', view === 'tree');
    show('cluster', view === 'cluster');
    show('sessions', view === 'sessions');
    for (const [id, v] of [['nav-tree', 'tree'], ['nav-cluster', 'cluster'], ['nav-sessions', 'sessions']]) {
      if (v === view) $(id).setAttribute('aria-current', 'page'); else $(id).removeAttribute('aria-current');
    }
    document.title = { tree: 'Tree', cluster: 'Cluster', sessions: 'Sessions' }[view] + ' · coord console';
  }

  // ===================================================================
  // Live updates: one EventSource on /ui/api/events
  // ===================================================================

  const pendingEvents = new Map(); // path -> Set of event types
  let eventFlush = null;

  function connectEvents() {
    closeEvents();
    const es = new EventSource('/ui/api/events');
    state.es = es;
    es.onopen = () => {
      setLive(true);
      if (es.wasDown) refreshAfterReconnect(); // events may have been missed
      es.wasDown = false;
    };
    es.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch { return; }
      if (!ev || typeof ev.path !== 'string') return;
      if (!pendingEvents.has(ev.path)) pendingEvents.set(ev.path, new Set());
      pendingEvents.get(ev.path).add(ev.type);
      // Coalesce bursts: one reload per path per 150 ms.
      if (!eventFlush) eventFlush = setTimeout(flushEvents, 150);
    };
    // `event: session`: the sign-in's state. closed/expired/stopping end it;
    // lost (its server session went; the next call opens a new one),
    // reconnected (a new session: watches must be set again) and resync (the
    // stream fell behind) mean: read everything shown again.
    es.addEventListener('session', (m) => {
      let st = '';
      try { st = JSON.parse(m.data).state; } catch { /* ignore */ }
      if (!state.me) return;
      switch (st) {
        case 'closed': showSignin('Your sign-in was closed. Please sign in again.'); break;
        case 'expired': showSignin('Your sign-in expired. Please sign in again.'); break;
        case 'stopping': showSignin('The server stopped, which ended your sign-in. Sign in again once it is back.'); break;
        case 'lost': clearTimeout(state.resync); state.resync = setTimeout(refreshAfterReconnect, 1000); break;
        case 'reconnected': refreshMe(); // a new session id
        // falls through
        case 'resync': clearTimeout(state.resync); refreshAfterReconnect(); break;
        default: break;
      }
    });
    es.onerror = () => {
      setLive(false);
      es.wasDown = true;
      if (es.readyState === EventSource.CLOSED && state.es === es) {
        // The browser gave up (e.g. a 401): check the sign-in, then reconnect.
        clearTimeout(state.esRetry);
        state.esRetry = setTimeout(async () => {
          if (state.es !== es || !state.me) return;
          try { await api('/ui/api/me'); } catch { return; } // a 401 shows the sign-in
          if (state.es === es && state.me) { connectEvents(); refreshAfterReconnect(); }
        }, 3000);
      }
    };
  }

  // A page the browser keeps after the person navigates away (its
  // back-forward cache) would keep its stream open, and a browser holds at
  // most six connections to one server over HTTP/1.1: close the stream when
  // the page is hidden away, open it again (and re-read) when it comes back.
  window.addEventListener('pagehide', () => { if (state.es) closeEvents(); });
  window.addEventListener('pageshow', (e) => {
    if (e.persisted && state.me && !state.es) { connectEvents(); refreshAfterReconnect(); }
  });

  function closeEvents() {
    clearTimeout(state.esRetry);
    clearTimeout(state.resync);
    clearTimeout(eventFlush);
    eventFlush = null;
    pendingEvents.clear();
    if (state.es) { state.es.close(); state.es = null; }
    setLive(false);
  }

  function setLive(on) {
    const l = $('live');
    l.classList.toggle('on', on);
    l.textContent = on ? 'live' : 'offline';
    l.title = on ? 'Live updates are on' : 'Live updates are off; reconnecting';
  }

  /** Events may have been missed while disconnected: reload what is shown. */
  function refreshAfterReconnect() {
    for (const n of tree.nodes.values()) if (n.expanded) requestChildren(n);
    if (nv.path != null) refreshNode();
  }

  function flushEvents() {
    eventFlush = null;
    if (!state.me) return;
    const evs = [...pendingEvents.entries()];
    pendingEvents.clear();
    const reload = new Set();
    for (const [path, types] of evs) {
      const n = tree.nodes.get(path);
      if (path === nv.path) {
        refreshNode();
        if (types.has('children') && !(n && n.expanded)) armChildWatch(path);
      }
      if (n && n.expanded && (types.has('children') || types.has('created') || types.has('deleted'))) reload.add(n);
      if (types.has('created') || types.has('deleted')) {
        const p = tree.nodes.get(parentPath(path) || '');
        if (p && p.expanded) reload.add(p);
      }
    }
    for (const n of reload) requestChildren(n);
  }

  // ===================================================================
  // Tree: lazy children, paging, keyboard navigation
  // ===================================================================

  const PAGE = 200;
  const tree = {
    nodes: new Map(), // path -> TreeNode
    root: null,
    moreOwner: null, // the node whose "load more" button carries id tree-more
    shown: null,     // the selected path the pane was last scrolled to
  };

  /** A tree item: <li role=treeitem data-path> with .row (.toggle .name .count) and a group <ul>. */
  function makeTreeNode(path, info, level) {
    const n = {
      path, level, expanded: false, loaded: 0, total: info ? info.numChildren : 0,
      childPaths: [], loading: null, again: false,
    };
    n.li = el('li', { role: 'treeitem', 'data-path': path, 'aria-level': level, 'aria-selected': 'false', tabindex: '-1' });
    n.toggle = el('button', { type: 'button', class: 'toggle', tabindex: '-1', 'aria-label': 'Expand ' + path });
    n.name = el('a', { class: 'name', href: treeHash(path), tabindex: '-1', text: path === '/' ? '/' : baseName(path) });
    n.count = el('span', { class: 'count' });
    n.eph = el('span', { class: 'eph', title: 'ephemeral', text: 'E', hidden: true });
    n.row = el('div', { class: 'row' }, n.toggle, n.name, n.eph, n.count);
    n.group = el('ul', { role: 'group', hidden: true });
    n.more = el('button', { type: 'button', class: 'tree-more link', hidden: true });
    n.li.append(n.row, n.group, n.more);
    n.toggle.addEventListener('click', (e) => { e.preventDefault(); focusItem(n.li); toggleNode(n); });
    n.name.addEventListener('click', () => focusItem(n.li));
    n.more.addEventListener('click', () => loadChildren(n, true));
    updateTreeInfo(n, info);
    tree.nodes.set(path, n);
    return n;
  }

  function updateTreeInfo(n, info) {
    if (info) {
      if (!n.expanded) n.total = info.numChildren;
      n.count.textContent = String(info.numChildren);
      n.count.classList.toggle('zero', info.numChildren === 0);
      n.count.title = info.numChildren === 1 ? '1 child' : info.numChildren + ' children';
      n.eph.hidden = !info.ephemeral;
      n.li.classList.toggle('ephemeral', !!info.ephemeral);
    }
    const leaf = !n.expanded && n.total === 0;
    n.li.classList.toggle('leaf', leaf);
    if (leaf) n.li.removeAttribute('aria-expanded'); else n.li.setAttribute('aria-expanded', String(n.expanded));
    n.toggle.textContent = n.expanded ? '▾' : leaf ? '·' : '▸';
    n.toggle.setAttribute('aria-label', (n.expanded ? 'Collapse ' : 'Expand ') + n.path);
  }

  function resetTree() {
    const t = $('tree');
    clear(t);
    tree.nodes.clear();
    tree.moreOwner = null;
    tree.shown = null;
    tree.root = makeTreeNode('/', null, 1);
    tree.root.total = -1; // unknown until listed
    updateTreeInfo(tree.root);
    tree.root.li.setAttribute('tabindex', '0');
    t.append(tree.root.li);
  }

  function ensureRoot() {
    const r = tree.root;
    if (r.expanded) return r.loading || Promise.resolve();
    return expandNode(r);
  }

  function expandNode(n) {
    n.expanded = true;
    n.group.hidden = false;
    updateTreeInfo(n);
    return loadChildren(n, false);
  }
  function collapseNode(n) {
    n.expanded = false;
    n.group.hidden = true;
    n.more.hidden = true;
    updateTreeInfo(n);
    assignMoreId();
  }
  function toggleNode(n) { if (n.expanded) collapseNode(n); else expandNode(n); }

  /** Reload an expanded node's children (after an event); runs one at a time per node. */
  function requestChildren(n) {
    if (n.loading) { n.again = true; return n.loading; }
    return loadChildren(n, false);
  }

  async function loadChildren(n, append) {
    if (n.loading) {
      if (!append) n.again = true;
      return n.loading;
    }
    const run = async () => {
      const offset = append ? n.loaded : 0;
      const limit = append ? PAGE : Math.min(1000, Math.max(PAGE, n.loaded));
      n.li.setAttribute('aria-busy', 'true');
      try {
        const res = await api(`/ui/api/children?path=${q(n.path)}&offset=${offset}&limit=${limit}&watch=1`);
        if (tree.nodes.get(n.path) !== n) return; // removed meanwhile
        showTreeError(n, '');
        renderChildren(n, res, append);
      } catch (e) {
        if (!state.me || tree.nodes.get(n.path) !== n) return;
        if (e.code === 'NoNode') {
          // Gone: the parent's reload removes it; say so meanwhile.
          showTreeError(n, 'no longer exists');
          const p = tree.nodes.get(parentPath(n.path) || '');
          if (p && p.expanded) setTimeout(() => requestChildren(p), 0);
        } else showTreeError(n, e.code === 'NoAuth' ? 'not allowed to list the children' : errText(e));
      } finally {
        n.li.removeAttribute('aria-busy');
      }
    };
    n.loading = (async () => {
      try {
        await run();
        while (n.again && n.expanded && state.me) { n.again = false; await run(); }
      } finally { n.loading = null; n.again = false; }
    })();
    return n.loading;
  }

  function showTreeError(n, text) {
    let e = n.group.querySelector(':scope > li.tree-error');
    if (!text) { if (e) e.remove(); return; }
    if (!e) { e = el('li', { class: 'tree-error', role: 'none' }); n.group.prepend(e); }
    e.textContent = text;
  }

  function renderChildren(n, res, append) {
    const children = res.children || [];
    n.total = res.total;
    n.count.textContent = String(res.total);
    n.count.classList.toggle('zero', res.total === 0);
    if (append) {
      const have = new Set(n.childPaths);
      for (const c of children) {
        const p = joinPath(n.path, c.name);
        if (have.has(p)) { updateTreeInfo(tree.nodes.get(p), c); continue; }
        const ch = makeTreeNode(p, c, n.level + 1);
        n.group.append(ch.li);
        n.childPaths.push(p);
      }
      n.loaded = n.childPaths.length;
      tree.moreOwner = n;
    } else {
      // Reconcile: keep existing items (and their expanded subtrees), in the new order.
      const old = new Set(n.childPaths);
      const paths = [];
      for (const c of children) {
        const p = joinPath(n.path, c.name);
        let ch = tree.nodes.get(p);
        if (ch && old.has(p)) { old.delete(p); updateTreeInfo(ch, c); }
        else ch = makeTreeNode(p, c, n.level + 1);
        n.group.append(ch.li);
        paths.push(p);
      }
      for (const p of old) removeTreeNode(p);
      n.childPaths = paths;
      n.loaded = paths.length;
      if (n.loaded < n.total && (!tree.moreOwner || !tree.moreOwner.expanded || tree.moreOwner.loaded >= tree.moreOwner.total)) tree.moreOwner = n;
    }
    updateTreeInfo(n);
    const more = n.expanded && n.loaded < n.total;
    n.more.hidden = !more;
    n.more.textContent = more ? `Load more (${n.loaded} of ${n.total} shown)` : '';
    assignMoreId();
    if (nv.path) markSelected(nv.path);
  }

  /** Exactly one "load more" button has id tree-more: the last one used, else the first shown. */
  function assignMoreId() {
    const cur = $('tree-more');
    if (cur) cur.removeAttribute('id');
    let b = null;
    const o = tree.moreOwner;
    if (o && tree.nodes.get(o.path) === o && !o.more.hidden && visibleInTree(o.more)) b = o.more;
    if (!b) b = [...$('tree').querySelectorAll('.tree-more')].find((x) => !x.hidden && visibleInTree(x)) || null;
    if (b) b.id = 'tree-more';
  }
  function visibleInTree(e) { return !e.closest('ul[hidden]'); }

  function removeTreeNode(p) {
    const n = tree.nodes.get(p);
    if (!n) return;
    for (const c of n.childPaths) removeTreeNode(c);
    n.li.remove();
    tree.nodes.delete(p);
    if (tree.moreOwner === n) tree.moreOwner = null;
  }

  /**
   * Expand the ancestors of path so its item shows (loading more pages of a
   * big parent when needed, up to 10), then mark it selected.
   */
  async function revealInTree(path) {
    await ensureRoot();
    const chain = [...ancestors(path), path];
    for (let i = 1; i < chain.length; i++) {
      const parent = tree.nodes.get(chain[i - 1]);
      if (!parent) break;
      if (!parent.expanded) await expandNode(parent);
      else if (parent.loading) await parent.loading;
      for (let k = 0; k < 10 && !tree.nodes.has(chain[i]) && parent.expanded && parent.loaded < parent.total; k++) {
        await loadChildren(parent, true);
      }
      if (!tree.nodes.has(chain[i])) break;
    }
    markSelected(path);
  }

  function markSelected(path) {
    for (const e of $('tree').querySelectorAll('[aria-selected="true"]')) {
      e.setAttribute('aria-selected', 'false');
      e.classList.remove('selected');
    }
    const n = tree.nodes.get(path);
    if (!n) return;
    n.li.setAttribute('aria-selected', 'true');
    n.li.classList.add('selected');
    if (!$('tree').contains(document.activeElement)) setRoving(n.li);
    if (tree.shown !== path) { tree.shown = path; scrollTreeTo(n.li); } // once per selection
  }

  function setRoving(li) {
    for (const e of $('tree').querySelectorAll('[role="treeitem"][tabindex="0"]')) if (e !== li) e.setAttribute('tabindex', '-1');
    li.setAttribute('tabindex', '0');
  }
  function focusItem(li) {
    if (!li) return;
    setRoving(li);
    li.focus({ preventScroll: true });
    scrollTreeTo(li);
  }
  /** Scroll the tree pane (only it, never the page) so li's row shows. */
  function scrollTreeTo(li) {
    const pane = li.closest('.tree-pane');
    if (!pane) return;
    const row = li.querySelector(':scope > .row').getBoundingClientRect();
    const box = pane.getBoundingClientRect();
    if (row.top < box.top) pane.scrollTop -= box.top - row.top + 8;
    else if (row.bottom > box.bottom) pane.scrollTop += row.bottom - box.bottom + 8;
  }
  function visibleItems() {
    return [...$('tree').querySelectorAll('[role="treeitem"]')].filter((li) => !li.parentElement.closest('ul[hidden]'));
  }

  function onTreeKey(e) {
    const li = e.target;
    if (!li || li.getAttribute('role') !== 'treeitem') return;
    const n = tree.nodes.get(li.dataset.path);
    if (!n) return;
    const items = visibleItems();
    const i = items.indexOf(li);
    switch (e.key) {
      case 'ArrowDown': focusItem(items[i + 1]); break;
      case 'ArrowUp': focusItem(items[i - 1]); break;
      case 'Home': focusItem(items[0]); break;
      case 'End': focusItem(items[items.length - 1]); break;
      case 'ArrowRight':
        if (!n.expanded) expandNode(n);
        else if (n.childPaths.length) focusItem(tree.nodes.get(n.childPaths[0]).li);
        break;
      case 'ArrowLeft':
        if (n.expanded && n !== tree.root) collapseNode(n);
        else { const p = tree.nodes.get(parentPath(n.path) || ''); if (p) focusItem(p.li); }
        break;
      case 'Enter': case ' ':
        location.hash = treeHash(n.path);
        break;
      default: return;
    }
    e.preventDefault();
  }

  // ===================================================================
  // Search: debounced, prefix or substring, results as links
  // ===================================================================

  let searchSeq = 0;
  const searchSoon = debounce(runSearch, 300);

  async function runSearch() {
    searchSoon.cancel();
    const seq = ++searchSeq;
    let text = $('search').value.trim();
    const mode = $('search-mode').value;
    const list = $('search-results');
    if (!text) { clear(list); show('search-info', false); return; }
    if (mode === 'prefix' && !text.startsWith('/')) text = '/' + text;
    try {
      const res = await api(`/ui/api/search?q=${q(text)}&mode=${q(mode)}&root=%2F&limit=100`);
      if (seq !== searchSeq) return;
      clear(list);
      for (const p of res.results || []) {
        const a = el('a', { href: treeHash(p), 'data-path': p, class: 'mono' });
        highlight(a, p, text, mode);
        list.append(el('li', null, a));
      }
      const n = (res.results || []).length;
      setText('search-info', `${n === 0 ? 'No' : n} match${n === 1 ? '' : 'es'}` +
        (res.visited != null ? `, ${res.visited} nodes searched` : '') + (res.truncated ? ' (stopped early: refine the search)' : ''));
      show('search-info', true);
    } catch (e) {
      if (seq !== searchSeq || !state.me) return;
      clear(list);
      setText('search-info', errText(e));
      show('search-info', true);
    }
  }

  function resetSearch() {
    searchSoon.cancel();
    searchSeq++;
    $('search').value = '';
    clear($('search-results'));
    show('search-info', false);
  }

  /** Puts p into a with the matched part in <mark> (text nodes only). */
  function highlight(a, p, text, mode) {
    const i = mode === 'prefix' ? (p.startsWith(text) ? 0 : -1) : p.indexOf(text);
    if (i < 0) { a.textContent = p; return; }
    a.append(p.slice(0, i), el('mark', { text: p.slice(i, i + text.length) }), p.slice(i + text.length));
  }

  // ===================================================================
  // Node view
  // ===================================================================

  const nv = {
    path: null,        // the shown node's path
    node: null,        // the last /ui/api/node answer shown
    base: null,        // the version the edit is based on (sent with Save)
    orig: null,        // the data as read (Uint8Array, or null for null data)
    work: null,        // the data being edited (bytes), changes on format switches
    rendered: '',      // what the textarea showed when last rendered
    format: 'text',    // the format shown now
    prefer: 'text',    // the format the person chose
    loadSeq: 0,
    loading: null,     // the promise of the last loadNode
    saving: false,
    refreshAfterSave: false,
  };

  function resetNodeView() {
    Object.assign(nv, { path: null, node: null, base: null, orig: null, work: null, rendered: '', saving: false, refreshAfterSave: false, prefer: 'text' });
    nv.loadSeq++;
    const node = $('node');
    node.removeAttribute('data-path');
    node.removeAttribute('data-version');
    setText('node-path', '');
    clear($('node-crumbs'));
    $('node-data').value = '';
    setMessage('');
    showError('node-error', '');
  }

  async function showTreeView(path) {
    const same = path === nv.path && nv.node;
    await Promise.all([
      revealInTree(path).catch((e) => { if (state.me) status(errText(e), 'error'); }),
      same ? refreshNode() : loadNode(path),
    ]);
    // Selecting a node opens it in the tree too: its children show, and
    // listing them leaves a child watch; a leaf gets the watch alone.
    if (path !== nv.path || !state.me) return;
    const t = tree.nodes.get(path);
    if (t && t.expanded) return;
    if (t && nv.node && nv.node.stat && nv.node.stat.numChildren > 0) await expandNode(t);
    else armChildWatch(path);
  }

  /** Leaves a child watch on path (so new children show) without listing it in the tree. */
  function armChildWatch(path) {
    api(`/ui/api/children?path=${q(path)}&offset=0&limit=1&watch=1`).then((res) => {
      const t = tree.nodes.get(path);
      if (t && !t.expanded) {
        t.total = res.total;
        t.count.textContent = String(res.total);
        t.count.classList.toggle('zero', res.total === 0);
        updateTreeInfo(t);
      }
    }, () => { /* not allowed or gone: the node view says so */ });
  }

  /** The textarea differs from what the server sent (typed, pasted or set). */
  function nodeDirty() {
    if (nv.path == null || !nv.node) return false;
    const ta = $('node-data');
    if (!ta.readOnly && ta.value !== nv.rendered) return true;
    return !sameBytes(nv.work, nv.orig);
  }

  /** The bytes Save sends: the textarea when edited, else the data being edited. */
  function currentBytes() {
    const ta = $('node-data');
    if (!ta.readOnly && ta.value !== nv.rendered) return utf8.encode(ta.value);
    return nv.work;
  }

  /**
   * Load the node at path (with a data watch) and show it, dropping any edits;
   * with opt.keepEdits, edits begun while the answer was on its way are kept.
   */
  function loadNode(path, opt) {
    nv.loading = loadNodeNow(path, opt || {});
    return nv.loading;
  }
  async function loadNodeNow(path, opt) {
    const seq = ++nv.loadSeq;
    if (path !== nv.path) {
      nv.path = path;
      nv.node = null;
      $('node').setAttribute('data-path', path);
      $('node').removeAttribute('data-version');
      renderHeader(path, null);
      $('node-data').value = '';
      nv.rendered = '';
      if (!opt.keepMessage) setMessage('');
      $('node').classList.add('loading');
    }
    try {
      const n = await api(`/ui/api/node?path=${q(path)}&watch=1`);
      if (seq !== nv.loadSeq) return;
      if (opt.keepEdits && path === nv.path && nodeDirty()) { editedAgainst(n); return; }
      renderNode(n);
      if (!opt.keepMessage) setMessage('');
    } catch (e) {
      if (seq !== nv.loadSeq || !state.me) return;
      renderMissing(path, e);
    } finally {
      if (seq === nv.loadSeq) $('node').classList.remove('loading');
    }
  }

  /**
   * The shown node may have changed (an event, a reconnect, coming back to the
   * view): reload it unless the person is editing; then only say so.
   */
  async function refreshNode() {
    if (nv.path == null) return;
    if (nv.saving) { nv.refreshAfterSave = true; return; }
    if (!nodeDirty()) {
      const before = nv.node && nv.node.stat ? nv.node.stat.version : null;
      await loadNode(nv.path, { keepMessage: true, keepEdits: true });
      const after = nv.node && nv.node.stat ? nv.node.stat.version : null;
      if (before != null && after != null && after !== before && !$('node-message').classList.contains('error')) {
        setMessage(`Reloaded: version ${after} arrived from the server.`);
      }
      return;
    }
    const path = nv.path, seq = ++nv.loadSeq;
    let n;
    try {
      n = await api(`/ui/api/node?path=${q(path)}&watch=1`); // re-arms the watch
    } catch (e) {
      if (seq !== nv.loadSeq || !state.me) return;
      if (e.code === 'NoNode') setMessage(`${path} was deleted on the server. Your edits are still here; Save will fail.`, 'warn');
      return;
    }
    if (seq !== nv.loadSeq || path !== nv.path) return;
    editedAgainst(n);
  }

  /** The server's node n arrived while the person edits the shown one: keep the edits, say if n is newer. */
  function editedAgainst(n) {
    if (n.stat && n.stat.version !== nv.base) {
      setMessage(`This node was changed on the server (now version ${n.stat.version}; you are editing version ${nv.base}). ` +
        'Your edits are kept; saving them will be refused. Reload to see the new data.', 'warn', true);
    } else if (n.stat) {
      nv.node.stat = n.stat;
      renderStat(n.stat);
    }
  }

  function renderHeader(path, n) {
    setText('node-path', path);
    const crumbs = $('node-crumbs');
    clear(crumbs);
    const parts = ['/', ...ancestors(path).slice(1), ...(path === '/' ? [] : [path])];
    parts.forEach((p, i) => {
      if (i > 0) crumbs.append(el('span', { class: 'crumb-sep', 'aria-hidden': 'true', text: '/' }));
      const label = p === '/' ? 'root' : baseName(p);
      if (p === path) crumbs.append(el('span', { class: 'crumb current', 'aria-current': 'page', text: label }));
      else crumbs.append(el('a', { class: 'crumb', href: treeHash(p), text: label }));
    });
    setText('node-kind', n ? n.kind || 'persistent' : '');
    setText('node-ttl', n && n.kind === 'ttl' && n.ttl_ms != null ? `TTL ${fmtDuration(n.ttl_ms)} (${n.ttl_ms} ms)` : '');
    setText('node-version', n && n.stat ? n.stat.version : '');
    setText('node-size', n && n.stat ? `${fmtBytes(n.stat.dataLength)}, ${n.stat.numChildren} children` : '');
    const root = path === '/';
    const ok = !!n;
    $('node-delete').disabled = root || !ok;
    $('node-move').disabled = root || !ok;
    $('node-copy').disabled = root || !ok;
    $('node-create').disabled = !ok;
    $('node-export').disabled = !ok;
    $('node-import').disabled = !ok;
    $('node-reload').disabled = false;
    $('node-acl-edit').disabled = !ok || !n.acl;
    $('node-save').disabled = !ok || n.readable === false;
  }

  function renderNode(n) {
    nv.node = n;
    nv.path = n.path;
    nv.base = n.stat ? n.stat.version : null;
    const node = $('node');
    node.setAttribute('data-path', n.path);
    if (n.stat) node.setAttribute('data-version', String(n.stat.version));
    renderHeader(n.path, n);
    if (n.readable === false) {
      const code = /\((\w+)\)\s*$/.exec(n.error || '');
      showError('node-error', `You are not allowed to read the data of ${n.path}` + (code ? ` (${code[1]}).` : '.'));
      $('node-error').title = n.error || '';
    } else showError('node-error', '');
    let bytes = null;
    if (n.readable !== false && n.data != null) {
      try { bytes = b64ToBytes(n.data); } catch { bytes = new Uint8Array(0); }
    }
    nv.orig = bytes;
    nv.work = bytes;
    // The chosen format, except binary data opens as hex.
    nv.format = nv.prefer;
    if (bytes && bytes.length && nv.format !== 'hex' && strictText(bytes) == null) nv.format = 'hex';
    renderData();
    renderStat(n.stat);
    renderAcl(n);
  }

  function renderMissing(path, e) {
    nv.node = null;
    nv.orig = nv.work = null;
    nv.base = null;
    renderHeader(path, null);
    $('node').setAttribute('data-path', path);
    $('node').removeAttribute('data-version');
    $('node-create').disabled = true;
    const ta = $('node-data');
    ta.value = '';
    ta.readOnly = true;
    ta.disabled = true;
    nv.rendered = '';
    setText('data-note', '');
    clear($('node-stat').tBodies[0]);
    clear($('node-acl'));
    if (e.code === 'NoNode') {
      showError('node-error', `There is no node at ${path} (it may have been deleted).`);
    } else if (e.code === 'NoAuth') {
      showError('node-error', `You are not allowed to see ${path}.`);
    } else showError('node-error', errText(e));
  }

  /** Fill the textarea from nv.work in nv.format. */
  function renderData() {
    const ta = $('node-data');
    const n = nv.node;
    const fmt = nv.format;
    $('data-format').value = fmt;
    ta.classList.toggle('hex', fmt === 'hex');
    const note = $('data-note');
    note.className = 'muted small';
    note.title = '';
    if (!n || n.readable === false) {
      ta.value = '';
      ta.readOnly = true;
      ta.disabled = true;
      nv.rendered = '';
      note.textContent = '';
      return;
    }
    ta.disabled = false;
    const b = nv.work;
    let value = '', msg = '';
    if (fmt === 'hex') {
      value = b ? hexdump(b) : '';
      msg = b == null ? 'null data (no bytes); hex view is read-only' : `${b.length} bytes; hex view is read-only`;
      ta.readOnly = true;
    } else {
      ta.readOnly = false;
      const text = b == null ? null : strictText(b);
      if (b == null) { value = ''; msg = 'null data (no bytes)'; }
      else if (b.length === 0) { value = ''; msg = 'empty (0 bytes)'; }
      else if (text == null) {
        value = utf8Loose.decode(b);
        msg = 'not valid UTF-8: shown with replacement characters (see hex); saving writes the text as shown';
        note.className = 'warn small';
      } else if (fmt === 'json') {
        try {
          value = JSON.stringify(JSON.parse(text), null, 2);
          msg = 'valid JSON, pretty-printed';
        } catch (e) {
          value = text;
          msg = 'not valid JSON; shown as text';
          note.title = e.message;
          note.className = 'warn small';
        }
      } else {
        value = text;
        msg = `${b.length} bytes, UTF-8`;
      }
    }
    ta.value = value;
    nv.rendered = ta.value; // as the textarea normalised it (line ends)
    note.textContent = msg;
    updateDirty();
  }

  /** Marks #node as edited (class dirty and the "unsaved edits" label). */
  function updateDirty() {
    const d = nodeDirty();
    $('node').classList.toggle('dirty', d);
    show('node-dirty', d);
  }

  function onFormatChange() {
    const ta = $('node-data');
    // Keep edits made in text/JSON before showing them in the new format.
    if (!ta.readOnly && ta.value !== nv.rendered) nv.work = utf8.encode(ta.value);
    nv.format = nv.prefer = $('data-format').value;
    renderData();
  }

  const STAT_FIELDS = [
    ['czxid', 'created zxid'], ['mzxid', 'modified zxid'], ['pzxid', 'children zxid'],
    ['ctime', 'created'], ['mtime', 'modified'],
    ['version', 'data version'], ['cversion', 'children version'], ['aversion', 'ACL version'],
    ['ephemeralOwner', 'ephemeral owner'], ['dataLength', 'data length'], ['numChildren', 'children'],
  ];

  function renderStat(st) {
    const body = $('node-stat').tBodies[0];
    clear(body);
    if (!st) return;
    for (const [f, label] of STAT_FIELDS) {
      const v = st[f];
      const cell = el('td', { class: 'mono' });
      if (f === 'ctime' || f === 'mtime') {
        // 0 on the root and /zookeeper's nodes, as in ZooKeeper: no time.
        if (v) cell.append(fmtTime(v), ' ', relSpan(v));
        else cell.append(String(v ?? ''), ' ', el('span', { class: 'muted', text: '(not set)' }));
        cell.title = v != null ? `${v} ms since 1970 (UTC ${new Date(v).toISOString()})` : '';
      } else cell.textContent = v == null ? '' : String(v);
      if (f === 'ephemeralOwner' && (v === '0x0' || v === '0' || !v)) cell.classList.add('muted');
      body.append(el('tr', { 'data-field': f }, el('th', { scope: 'row', title: f, text: label }), cell));
    }
  }

  function renderAcl(n) {
    const list = $('node-acl');
    clear(list);
    if (!n.acl) {
      list.append(el('li', { class: 'muted', text: n.aclError ? `not allowed to read the ACL (${n.aclError})` : 'no ACL' }));
      return;
    }
    for (const a of n.acl) list.append(el('li', { class: 'mono', text: `${a.scheme}:${a.id} ${a.perms}` }));
  }

  /**
   * #node-message: the node's status line; kind '' | 'ok' | 'warn' | 'error';
   * actions: true for a Reload button, or [{label, fn}].
   */
  function setMessage(text, kind, actions) {
    const m = $('node-message');
    clear(m);
    m.className = 'message' + (kind ? ' ' + kind : '');
    if (!text) return;
    m.append(el('span', { text }));
    if (actions === true) actions = [{ label: 'Reload', fn: reloadNode }];
    for (const a of actions || []) {
      m.append(' ', el('button', { type: 'button', class: 'small', text: a.label, on: { click: a.fn } }));
    }
  }

  function reloadNode() {
    if (nv.path == null) return;
    setMessage('');
    return loadNode(nv.path);
  }

  async function saveNode() {
    if (!nv.node || nv.saving) return;
    const path = nv.path;
    const data = currentBytes();
    const version = nv.base;
    if (nv.format === 'json' && !$('node-data').readOnly && $('node-data').value !== nv.rendered) {
      try { JSON.parse($('node-data').value); } catch (e) {
        setMessage('Not saved: the text is not valid JSON (' + e.message + '). Switch to text to save it as it is.', 'error');
        return;
      }
    }
    nv.saving = true;
    $('node-save').disabled = true;
    setMessage('saving…');
    try {
      const res = await post('/ui/api/set', { path, data: data == null ? null : bytesToB64(data), version });
      if (path !== nv.path) return;
      const st = res.stat || Object.assign({}, nv.node.stat, { version: version + 1 });
      nv.node.stat = st;
      nv.node.data = data == null ? null : bytesToB64(data);
      nv.base = st.version;
      nv.orig = nv.work = data;
      $('node').setAttribute('data-version', String(st.version));
      renderHeader(path, nv.node);
      renderData();
      renderStat(st);
      setMessage('saved', 'ok');
    } catch (e) {
      if (!state.me) return;
      if (e.code === 'BadVersion' && path === nv.path) {
        await conflict(path, version);
      } else if (e.code === 'NoNode') {
        setMessage(`Not saved: ${path} no longer exists.`, 'error');
      } else if (e.code === 'NoAuth') {
        setMessage(`Not saved: you are not allowed to write ${path}.`, 'error');
      } else setMessage('Not saved: ' + errText(e), 'error');
    } finally {
      nv.saving = false;
      if (nv.node) $('node-save').disabled = nv.node.readable === false;
      if (nv.refreshAfterSave) { nv.refreshAfterSave = false; refreshNode(); }
    }
  }

  /**
   * A save refused with BadVersion: nothing was written. Show their version
   * (so later changes show live again) and keep the person's text aside,
   * with a button to put it back into the editor.
   */
  async function conflict(path, version) {
    const ta = $('node-data');
    const mine = { text: ta.readOnly ? null : ta.value, bytes: currentBytes(), format: nv.format };
    const say = (now) => setMessage(`Not saved: ${path} was changed by someone else since you opened it ` +
      `(you edited version ${version}${now != null ? `, it is now version ${now}` : ''}). Nothing was overwritten. ` +
      'The editor shows their version; your text is kept aside.', 'error', [
      { label: 'Put my text back', fn: () => restoreMine(path, mine) },
      { label: 'Reload', fn: reloadNode },
    ]);
    say(null);
    await loadNode(path, { keepMessage: true });
    if (nv.path === path && nv.node && nv.node.stat) say(nv.node.stat.version);
  }

  /** Back into the editor, now based on the version shown: Save then replaces theirs. */
  function restoreMine(path, mine) {
    if (nv.path !== path || !nv.node) return;
    if (mine.text != null && nv.format !== 'hex') {
      $('node-data').value = mine.text;
    } else {
      nv.work = mine.bytes;
      renderData();
    }
    updateDirty();
    setMessage(`Your text is back, on top of version ${nv.base}: Save replaces that version with it.`, 'warn');
    $('node-data').focus();
  }

  // ===================================================================
  // Dialogs: open/close helpers and the shared confirmation dialog
  // ===================================================================

  function openDialog(d, focusEl) {
    for (const e of d.querySelectorAll('.error')) { e.textContent = ''; e.hidden = true; }
    if (!d.open) d.showModal();
    if (focusEl) { focusEl.focus(); if (focusEl.select && focusEl.type === 'text') focusEl.select(); }
  }
  function closeAllDialogs() {
    for (const d of document.querySelectorAll('dialog[open]')) d.close();
  }
  function dialogBusy(d, on) {
    for (const b of d.querySelectorAll('button')) b.disabled = on;
    d.classList.toggle('busy', on);
  }

  let confirmResolve = null;
  /**
   * confirmAction(text, {title, ok}) -> Promise<boolean>. The one dialog for
   * every dangerous action; Cancel, Escape and closing answer false.
   */
  function confirmAction(text, opt = {}) {
    const d = $('confirm-dialog');
    if (confirmResolve) { confirmResolve(false); confirmResolve = null; }
    setText('confirm-title', opt.title || 'Are you sure?');
    setText('confirm-text', text);
    setText('confirm-ok', opt.ok || 'OK');
    $('confirm-ok').classList.toggle('danger', opt.danger !== false);
    $('confirm-ok').classList.toggle('primary', opt.danger === false);
    dialogBusy(d, false);
    return new Promise((resolve) => {
      confirmResolve = resolve;
      openDialog(d, $('confirm-cancel'));
    });
  }
  function answerConfirm(v) {
    const r = confirmResolve;
    confirmResolve = null;
    const d = $('confirm-dialog');
    if (d.open) d.close();
    if (r) r(v);
  }

  function setupDialogs() {
    const cd = $('confirm-dialog');
    cd.querySelector('form').addEventListener('submit', (e) => { e.preventDefault(); answerConfirm(true); });
    $('confirm-cancel').addEventListener('click', () => answerConfirm(false));
    cd.addEventListener('close', () => { if (confirmResolve) answerConfirm(false); });
    for (const d of document.querySelectorAll('dialog')) {
      for (const b of d.querySelectorAll('button.cancel')) b.addEventListener('click', () => d.close());
      // A click on the backdrop (outside the form) cancels too.
      d.addEventListener('click', (e) => { if (e.target === d) d.close(); });
    }
    $('create-form').addEventListener('submit', (e) => { e.preventDefault(); submitCreate(); });
    $('copy-form').addEventListener('submit', (e) => { e.preventDefault(); submitCopy(); });
    $('acl-form').addEventListener('submit', (e) => { e.preventDefault(); submitAcl(); });
    $('create-mode').addEventListener('change', updateCreateHint);
    $('create-acl').addEventListener('change', updateCreateHint);
    $('acl-add').addEventListener('click', () => { const r = aclRow({ scheme: 'world', id: 'anyone', perms: 'r' }); $('acl-rows').append(r); r.querySelector('input').focus(); });
  }

  // ===================================================================
  // Node actions: create, delete, copy/move, export, import, ACL
  // ===================================================================

  // --- create ---------------------------------------------------------
  const ACL_PRESETS = {
    open: [{ perms: 'cdrwa', scheme: 'world', id: 'anyone' }],
    creator: [{ perms: 'cdrwa', scheme: 'auth', id: '' }],
    'read-only-world': [{ perms: 'r', scheme: 'world', id: 'anyone' }],
  };

  function openCreate() {
    if (!nv.node) return;
    setText('create-parent', nv.path);
    $('create-name').value = '';
    $('create-data').value = '';
    updateCreateHint();
    dialogBusy($('create-dialog'), false);
    openDialog($('create-dialog'), $('create-name'));
  }

  function updateCreateHint() {
    const mode = $('create-mode').value;
    show('create-ttl-field', mode.endsWith('_ttl'));
    const hints = [];
    if (mode.startsWith('ephemeral')) hints.push('Ephemeral nodes belong to this console sign-in: they are deleted when you sign out or the sign-in expires.');
    if (mode.includes('sequential')) hints.push('The server appends a 10-digit sequence number to the name (the name may be empty).');
    if (mode === 'container') hints.push('A container is deleted by the server once its last child is gone.');
    if (mode.endsWith('_ttl')) hints.push('Deleted by the server when it has had no children and no changes for the TTL.');
    if ($('create-acl').value === 'creator') {
      hints.push(state.me && state.me.user ? `Only you (${state.me.user}) will have access.` : 'Needs a signed-in user: anonymous visitors have no identity to give access to.');
    }
    setText('create-hint', hints.join(' '));
  }

  async function submitCreate() {
    const d = $('create-dialog');
    const parent = nv.path;
    let name = $('create-name').value.trim();
    const mode = $('create-mode').value;
    if (name.startsWith('/')) name = name.replace(/^\/+/, '');
    const segs = name.split('/');
    const seq = mode.includes('sequential');
    if ((!name && !seq) || segs.slice(0, -1).some((s) => !s) || (segs[segs.length - 1] === '' && !seq && segs.length > 1) ||
        segs.some((s) => s === '.' || s === '..')) {
      showError('create-error', name ? 'That is not a valid name: no empty parts, "." or "..".' : 'Give the new node a name.');
      $('create-name').focus();
      return;
    }
    const body = {
      path: joinPath(parent, name),
      data: bytesToB64(utf8.encode($('create-data').value)),
      mode,
      ttl_ms: 0,
      acl: ACL_PRESETS[$('create-acl').value] || ACL_PRESETS.open,
    };
    if (mode.endsWith('_ttl')) {
      const ttl = Number($('create-ttl').value);
      if (!Number.isInteger(ttl) || ttl <= 0) { showError('create-error', 'The TTL is a whole number of milliseconds above 0.'); return; }
      body.ttl_ms = ttl;
    }
    showError('create-error', '');
    dialogBusy(d, true);
    try {
      const res = await post('/ui/api/create', body);
      d.close();
      const created = res.path || body.path;
      status(`Created ${created}.`, 'ok');
      const p = tree.nodes.get(parent);
      if (p && p.expanded) requestChildren(p);
      location.hash = treeHash(created);
    } catch (e) {
      if (!state.me) return;
      showError('create-error', e.code === 'NodeExists' ? `${body.path} already exists.` :
        e.code === 'NoNode' ? `The parent of ${body.path} does not exist.` :
        e.code === 'NoAuth' ? `You are not allowed to create children of ${parent}.` : errText(e));
    } finally { dialogBusy(d, false); }
  }

  // --- delete ---------------------------------------------------------
  async function deleteNode() {
    if (!nv.node || nv.path === '/') return;
    const path = nv.path;
    const st = nv.node.stat || {};
    try {
      // Count first: the Stat shown may be older than the subtree.
      const c = await api(`/ui/api/count?path=${q(path)}`);
      if (c.count > 1) { await deleteSubtree(path, '', c); return; }
      if (!await confirmAction(`Delete ${path}? It has no children.` + (st.version != null ? ` (version ${st.version})` : ''),
        { title: 'Delete node', ok: 'Delete' })) return;
      try {
        await post('/ui/api/delete', { path, version: st.version ?? -1, recursive: false });
        afterDelete(path, 1);
      } catch (e) {
        if (e.code !== 'NotEmpty') throw e;
        await deleteSubtree(path, 'Children were added since it was counted. ');
      }
    } catch (e) {
      if (!state.me) return;
      if (e.code === 'BadVersion') setMessage(`Not deleted: ${path} was changed by someone else since you opened it.`, 'error', true);
      else setMessage('Not deleted: ' + errText(e), 'error');
    }
  }

  async function deleteSubtree(path, why, counted) {
    for (let tries = 0; tries < 5; tries++) {
      const c = counted || await api(`/ui/api/count?path=${q(path)}`);
      counted = null;
      const n = c.count;
      const desc = n - 1;
      let text = `${why}Delete ${path} and its ${desc} descendant${desc === 1 ? '' : 's'} (${n} node${n === 1 ? '' : 's'})?`;
      if (c.ephemerals) text += ` ${c.ephemerals} of them ${c.ephemerals === 1 ? 'is an ephemeral' : 'are ephemerals'} of live sessions.`;
      if (c.truncated) text += ' The count stopped early: the subtree is at least this big.';
      text += ' This cannot be undone.';
      if (!await confirmAction(text, { title: 'Delete subtree', ok: `Delete ${n} nodes` })) return;
      try {
        const res = await post('/ui/api/delete', { path, version: -1, recursive: true, count: n });
        afterDelete(path, res.deleted ?? n);
        return;
      } catch (e) {
        if (e.code !== 'Changed') throw e;
        why = `The subtree changed since it was counted (${e.message}). `;
      }
    }
  }

  /** Drops search results at or under path (after a delete or move). */
  function dropSearchResults(path) {
    for (const a of $('search-results').querySelectorAll('a[data-path]')) {
      const p = a.getAttribute('data-path');
      if (p === path || p.startsWith(path + '/')) a.parentElement.remove();
    }
  }

  function afterDelete(path, count) {
    dropSearchResults(path);
    status(`Deleted ${path}` + (count > 1 ? ` (${count} nodes).` : '.'), 'ok');
    const parent = parentPath(path);
    const p = tree.nodes.get(parent);
    removeTreeNode(path);
    if (p && p.expanded) requestChildren(p);
    nv.node = null; // nothing left to keep
    location.hash = treeHash(parent);
  }

  // --- copy and move ---------------------------------------------------
  let copyMove = false;
  function openCopy(move) {
    if (!nv.node || nv.path === '/') return;
    copyMove = move;
    const from = nv.path;
    setText('copy-title', move ? 'Move or rename' : 'Copy');
    setText('copy-from-line', (move ? 'Move ' : 'Copy ') + from + (nv.node.stat && nv.node.stat.numChildren ? ' and everything under it' : ''));
    setText('copy-submit', move ? 'Move' : 'Copy');
    setText('copy-hint', move
      ? 'The subtree is created at the new path and removed from the old one in one atomic step. Subtrees with ephemeral nodes cannot be moved.'
      : 'Copies data and ACLs of the whole subtree in one atomic step; ephemeral nodes are copied as persistent ones only if the server allows it.');
    $('copy-to').value = move ? from : from + '-copy';
    dialogBusy($('copy-dialog'), false);
    openDialog($('copy-dialog'), $('copy-to'));
  }

  async function submitCopy() {
    const d = $('copy-dialog');
    const from = nv.path;
    let to = $('copy-to').value.trim();
    if (to.length > 1) to = to.replace(/\/+$/, '');
    if (!to.startsWith('/') || to === '/' || to.split('/').slice(1).some((s) => !s || s === '.' || s === '..')) {
      showError('copy-error', 'Give a full path such as /app/new-name.');
      return;
    }
    if (to === from) { showError('copy-error', 'That is where it already is.'); return; }
    if (to.startsWith(from + '/')) { showError('copy-error', 'A node cannot be copied or moved under itself.'); return; }
    showError('copy-error', '');
    dialogBusy(d, true);
    try {
      const res = await post('/ui/api/copy', { from, to, move: copyMove });
      d.close();
      const n = res.copied ?? 0;
      status(`${copyMove ? 'Moved' : 'Copied'} ${from} to ${to} (${n} node${n === 1 ? '' : 's'}).`, 'ok');
      for (const p of new Set([parentPath(to), copyMove ? parentPath(from) : null])) {
        const t = p && tree.nodes.get(p);
        if (t && t.expanded) requestChildren(t);
      }
      if (copyMove) { removeTreeNode(from); dropSearchResults(from); nv.node = null; }
      location.hash = treeHash(to);
    } catch (e) {
      if (!state.me) return;
      showError('copy-error', e.code === 'NodeExists' ? `${to} already exists.` :
        e.code === 'NoNode' ? `The parent of ${to} does not exist (or ${from} is gone).` : errText(e));
    } finally { dialogBusy(d, false); }
  }

  // --- export and import -------------------------------------------------
  async function exportNode() {
    if (!nv.node) return;
    const path = nv.path;
    try {
      const res = await api(`/ui/api/export?path=${q(path)}`, { raw: true });
      const blob = await res.blob();
      let name = '';
      const cd = res.headers.get('Content-Disposition') || '';
      const m = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(cd);
      if (m) name = decodeSeg(m[1]);
      if (!name) name = 'coord' + (path === '/' ? '-root' : path.replace(/[^A-Za-z0-9._-]+/g, '_')) + '.json';
      const url = URL.createObjectURL(blob);
      const a = el('a', { href: url, download: name, class: 'sr-only' });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      status(`Exported ${path} as ${name}.`, 'ok');
    } catch (e) {
      if (state.me) setMessage('Export failed: ' + errText(e), 'error');
    }
  }

  /**
   * Import an export file under the selected node: the file's root /x/name
   * lands at <selected>/name (the request's `to` is that full path; an export
   * of / is imported at the selected node itself).
   */
  async function importFile() {
    const input = $('import-file');
    const file = input.files && input.files[0];
    input.value = '';
    if (!file) return;
    if (!nv.node && nv.loading) await nv.loading; // chosen while the node was loading
    if (!nv.node) { setMessage(`Not imported: open the node to import ${file.name} into first.`, 'error'); return; }
    const into = nv.path;
    let body, to = into;
    try {
      body = await file.text();
      const f = JSON.parse(body);
      if (f && typeof f.root === 'string' && f.root !== '/' && f.root !== '') to = joinPath(into, baseName(f.root.replace(/\/+$/, '')));
    } catch {
      setMessage(`Not imported: ${file.name} is not an export file (not JSON).`, 'error');
      return;
    }
    setMessage(`Importing ${file.name} into ${to}…`);
    try {
      const res = await post(`/ui/api/import?to=${q(to)}`, body);
      const n = res.created ?? 0;
      setMessage(`imported ${n} node${n === 1 ? '' : 's'} from ${file.name} at ${to}`, 'ok');
      status(`Imported ${n} nodes at ${to}.`, 'ok');
      const t = tree.nodes.get(into);
      if (t && t.expanded) requestChildren(t);
      if (to !== into) location.hash = treeHash(to);
      else refreshNode();
    } catch (e) {
      if (!state.me) return;
      setMessage('Not imported: ' + (e.code === 'NodeExists' ? `${to} (or a node in the file) already exists.` : errText(e)), 'error');
    }
  }

  // --- ACL -------------------------------------------------------------
  function aclRow(a) {
    const perms = el('span', { class: 'perms' });
    for (const p of 'cdrwa') {
      const id = 'acl-p-' + Math.random().toString(36).slice(2);
      perms.append(el('input', { type: 'checkbox', id, value: p, checked: a.perms.includes(p) ? true : null }),
        el('label', { for: id, text: p, title: { c: 'create', d: 'delete', r: 'read', w: 'write', a: 'admin' }[p] }));
    }
    const tr = el('tr', null,
      el('td', null, el('input', { type: 'text', class: 'acl-scheme', value: a.scheme, 'aria-label': 'scheme', spellcheck: 'false', size: 8 })),
      el('td', null, el('input', { type: 'text', class: 'acl-id', value: a.id, 'aria-label': 'id', spellcheck: 'false' })),
      el('td', null, perms),
      el('td', null, el('button', { type: 'button', class: 'small', text: 'Remove', on: { click: () => tr.remove() } })));
    return tr;
  }

  function openAcl() {
    if (!nv.node || !nv.node.acl) return;
    setText('acl-path-line', `${nv.path} (ACL version ${nv.node.stat ? nv.node.stat.aversion : '?'})`);
    const rows = $('acl-rows');
    clear(rows);
    for (const a of nv.node.acl) rows.append(aclRow(a));
    dialogBusy($('acl-dialog'), false);
    openDialog($('acl-dialog'), rows.querySelector('input'));
  }

  async function submitAcl() {
    const d = $('acl-dialog');
    const acl = [];
    for (const tr of $('acl-rows').rows) {
      const scheme = tr.querySelector('.acl-scheme').value.trim();
      const id = tr.querySelector('.acl-id').value.trim();
      const perms = [...tr.querySelectorAll('input[type=checkbox]')].filter((c) => c.checked).map((c) => c.value).join('');
      if (!scheme) { showError('acl-error', 'Every entry needs a scheme.'); return; }
      if (!perms) { showError('acl-error', `The entry ${scheme}:${id} has no permissions; remove it instead.`); return; }
      acl.push({ perms, scheme, id });
    }
    if (!acl.length) { showError('acl-error', 'A node needs at least one ACL entry.'); return; }
    dialogBusy(d, true);
    try {
      await post('/ui/api/setacl', { path: nv.path, acl, aversion: nv.node.stat.aversion });
      d.close();
      status(`ACL of ${nv.path} set.`, 'ok');
      refreshNode();
    } catch (e) {
      if (!state.me) return;
      showError('acl-error', e.code === 'BadVersion' ? 'The ACL was changed by someone else since you opened it: close, reload and try again.' :
        e.code === 'InvalidACL' ? 'The server refused this ACL: ' + e.message : errText(e));
    } finally { dialogBusy(d, false); }
  }

  // ===================================================================
  // Cluster view: members, raft configuration, charts; polled every 2 s
  // ===================================================================

  const cl = { timer: null, gen: 0, rows: new Map(), colors: new Map(), charts: null, last: null };

  function startCluster() {
    stopCluster();
    const gen = ++cl.gen;
    if (!cl.charts) buildCharts();
    return pollCluster(gen);
  }
  function stopCluster() { cl.gen++; clearTimeout(cl.timer); cl.timer = null; }

  async function pollCluster(gen) {
    if (gen !== cl.gen) return;
    try {
      if (document.hidden && cl.last) return; // a background tab skips polls (finally re-arms)
      const c = await api('/ui/api/cluster');
      if (gen !== cl.gen) return;
      renderCluster(c);
      showError('cluster-error', '');
    } catch (e) {
      if (gen !== cl.gen || !state.me) return;
      showError('cluster-error', errText(e));
    } finally {
      if (gen === cl.gen && state.me) {
        clearTimeout(cl.timer);
        cl.timer = setTimeout(() => pollCluster(gen), 2000);
      }
    }
  }

  function seriesClass(id) {
    if (!cl.colors.has(id)) cl.colors.set(id, cl.colors.size % 8);
    return 's' + cl.colors.get(id);
  }

  function renderCluster(c) {
    cl.last = c;
    const leader = c.leader || '';
    setText('cluster-leader', leader || 'none');
    $('cluster-leader').classList.toggle('warn', !leader);
    setText('cluster-server', c.server ? `(this console is connected to ${c.server})` : '');
    const members = [...(c.members || [])].sort((a, b) => String(a.id).localeCompare(String(b.id), undefined, { numeric: true }));
    for (const m of members) seriesClass(m.id);
    renderMembers(members, c);
    renderRaft(c.raft || [], members);
    renderCharts(c, members);
    $('members').setAttribute('data-leader', leader);
  }

  function renderMembers(members, c) {
    const body = $('members').tBodies[0];
    const seen = new Set();
    const admin = !!(state.me && state.me.admin);
    const voters = new Set((c.raft || []).filter((r) => r.suffrage === 'voter').map((r) => r.id));
    for (const m of members) {
      seen.add(m.id);
      let r = cl.rows.get(m.id);
      if (!r) {
        r = { tr: el('tr', { 'data-member': m.id }) };
        const cell = (cls) => { const td = el('td', { class: cls }); r.tr.append(td); return td; };
        r.id = el('th', { scope: 'row', class: 'id mono' });
        r.tr.append(r.id);
        r.state = cell('state'); r.role = cell('role'); r.zxid = cell('zxid mono'); r.applied = cell('applied num');
        r.lag = cell('lag num'); r.sessions = cell('sessions num'); r.watches = cell('watches num'); r.znodes = cell('znodes num');
        r.health = cell('health'); r.uptime = cell('uptime');
        r.actions = cell('actions admin-only');
        r.transfer = el('button', { type: 'button', class: 'transfer small', text: 'Make leader' });
        r.promote = el('button', { type: 'button', class: 'promote small', text: 'Promote' });
        r.remove = el('button', { type: 'button', class: 'remove small danger', text: 'Remove' });
        r.transfer.addEventListener('click', () => clusterAction('transfer', m.id));
        r.promote.addEventListener('click', () => clusterAction('promote', m.id));
        r.remove.addEventListener('click', () => clusterAction('remove', m.id));
        r.actions.append(r.transfer, ' ', r.promote, ' ', r.remove);
        cl.rows.set(m.id, r);
      }
      body.append(r.tr); // keeps the sorted order
      clear(r.id);
      r.id.append(el('span', { class: 'swatch ' + seriesClass(m.id), 'aria-hidden': 'true' }), String(m.id));
      if (m.id === c.server) r.id.append(el('span', { class: 'badge subtle', text: 'this', title: 'the server this console talks to' }));
      r.tr.classList.toggle('is-leader', !!m.leader || m.id === c.leader);
      r.tr.classList.toggle('is-down', m.alive === false);
      setText(r.state, m.state);
      r.state.className = 'state st-' + String(m.state || '').replace(/[^a-z]/g, '');
      setText(r.role, m.role);
      // An unreachable member reports nothing: dashes, not zeros.
      const down = m.alive === false;
      const val = (v) => (down ? '—' : fmtNum(v));
      setText(r.zxid, down ? '—' : m.last_zxid || '—');
      setText(r.applied, val(m.applied_index));
      r.applied.title = !down && m.commit_index != null ? `commit index ${m.commit_index}` : '';
      setText(r.lag, val(m.lag));
      r.lag.classList.toggle('warn', !down && m.lag > 100);
      setText(r.sessions, val(m.sessions));
      setText(r.watches, val(m.watches));
      setText(r.znodes, val(m.znodes));
      const health = m.alive === false ? 'unreachable' : m.healthy ? 'healthy' : 'unhealthy';
      setText(r.health, health);
      r.health.className = 'health h-' + health;
      setText(r.uptime, !down && m.uptime_ms ? fmtDuration(m.uptime_ms) : '—');
      // Admin actions: shown to admins, enabled where they apply.
      r.actions.hidden = !admin;
      const isLeader = !!m.leader || m.id === c.leader;
      const isVoter = m.role === 'voter' || voters.has(m.id);
      r.transfer.disabled = isLeader || !isVoter || m.alive === false;
      r.transfer.title = isLeader ? 'already the leader' : !isVoter ? 'only voters can lead' : m.alive === false ? 'unreachable' : `transfer leadership to ${m.id}`;
      r.promote.disabled = m.role !== 'observer';
      r.promote.title = m.role === 'observer' ? `make ${m.id} a voter` : 'already a voter';
      r.remove.title = `remove ${m.id} from the cluster`;
    }
    for (const [id, r] of cl.rows) if (!seen.has(id)) { r.tr.remove(); cl.rows.delete(id); }
  }

  /** The raft configuration, with each member's client addresses beside it. */
  function renderRaft(raft, members) {
    const body = $('raft-config').tBodies[0];
    clear(body);
    const byId = new Map(members.map((m) => [m.id, m]));
    for (const r of raft) {
      const m = byId.get(r.id) || {};
      body.append(el('tr', { 'data-raft': r.id },
        el('th', { scope: 'row', class: 'mono', text: r.id }),
        el('td', { class: 'mono', text: r.address }),
        el('td', { class: r.suffrage === 'voter' ? '' : 'muted', text: r.suffrage }),
        el('td', { class: 'mono', text: m.zk_addr || '—' }),
        el('td', { class: 'mono', text: m.http_addr || '—' }),
        el('td', { class: 'mono', text: m.grpc_addr || '—' })));
    }
    if (!raft.length) body.append(el('tr', null, el('td', { colspan: 6, class: 'muted', text: 'no configuration reported' })));
  }

  async function clusterAction(kind, id) {
    const c = cl.last || {};
    let text, ok;
    if (kind === 'transfer') {
      text = `Transfer leadership from ${c.leader || 'the current leader'} to ${id}? Writes pause briefly while the new leader takes over.`;
      ok = 'Transfer leadership';
    } else if (kind === 'promote') {
      text = `Promote ${id} from observer to voter? It will count towards the quorum from now on.`;
      ok = 'Promote';
    } else {
      text = `Remove ${id} from the cluster? It stops being a member; sessions on it move to other servers.` +
        (id === c.leader ? ' It is the leader: a new leader is elected first.' : '') +
        (id === c.server ? ' It is the server this console talks to: the console may lose its connection.' : '');
      ok = 'Remove ' + id;
    }
    if (!await confirmAction(text, { title: { transfer: 'Transfer leadership', promote: 'Promote to voter', remove: 'Remove member' }[kind], ok })) return;
    try {
      const res = await post('/ui/api/cluster/' + kind, { id });
      status(kind === 'transfer' ? `Leadership transferred to ${res.leader || id}.` : kind === 'promote' ? `${id} is now a voter.` : `${id} removed.`, 'ok');
    } catch (e) {
      if (!state.me) return;
      status(errText(e), 'error');
      showError('cluster-error', errText(e));
    }
    if (state.view === 'cluster') startCluster();
  }

  // --- charts (inline SVG, no library) -----------------------------------
  const CHARTS = [
    { id: 'chart-reads', title: 'Reads/s', unit: '/s', keys: [['reads_per_s', '']] },
    { id: 'chart-writes', title: 'Writes/s', unit: '/s', keys: [['writes_per_s', '']] },
    { id: 'chart-latency', title: 'Write latency (ms)', note: 'solid p99, dashed p50', unit: ' ms', keys: [['write_p99_ms', 'p99'], ['write_p50_ms', 'p50']] },
    { id: 'chart-lag', title: 'Lag (entries behind the leader)', unit: '', keys: [['lag', '']] },
  ];
  const CH = 220, ML = 52, MR = 14, MT = 30, MB = 34;

  function buildCharts() {
    const box = $('charts');
    clear(box);
    cl.charts = new Map();
    for (const ch of CHARTS) {
      const s = svg('svg', { id: ch.id, class: 'chart', viewBox: `0 0 640 ${CH}`, role: 'img', 'aria-label': ch.title, preserveAspectRatio: 'xMidYMid meet' });
      const legend = el('ul', { class: 'legend' });
      const fig = el('figure', { class: 'chartbox' }, s, legend);
      box.append(fig);
      cl.charts.set(ch.id, { svg: s, legend, fig });
    }
  }

  /** Round up to 1, 2, 2.5 or 5 times a power of ten. */
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function renderCharts(c, members) {
    const samples = c.samples || {};
    const ids = [...new Set([...members.map((m) => m.id), ...Object.keys(samples)])];
    let tmax = 0;
    for (const id of ids) for (const s of samples[id] || []) if (s.t > tmax) tmax = s.t;
    const tmin = tmax - 10 * 60 * 1000;
    for (const ch of CHARTS) {
      const series = [];
      for (const id of ids) {
        for (const [key, sub] of ch.keys) {
          const pts = (samples[id] || []).filter((s) => s.t >= tmin && s[key] != null && Number.isFinite(s[key])).map((s) => [s.t, s[key]]);
          series.push({ id, label: sub ? `${id} ${sub}` : id, cls: seriesClass(id), dashed: sub === 'p50', pts });
        }
      }
      drawChart(cl.charts.get(ch.id), ch, series, tmin, tmax);
    }
  }

  function drawChart(box, ch, series, tmin, tmax) {
    const s = box.svg;
    clear(s);
    // Draw at the figure's own width so text keeps its size on phones.
    const CW = Math.max(300, Math.min(1000, Math.round(box.fig.clientWidth - 26))) || 640;
    s.setAttribute('viewBox', `0 0 ${CW} ${CH}`);
    const all = series.flatMap((x) => x.pts);
    const t0 = all.length ? Math.min(...all.map((p) => p[0])) : tmin;
    const t1 = Math.max(tmax, t0 + 1);
    const vmax = niceMax(all.length ? Math.max(...all.map((p) => p[1])) : 0);
    const vmin = 0;
    const x = (t) => ML + (t - t0) / (t1 - t0) * (CW - ML - MR);
    const y = (v) => MT + (1 - (v - vmin) / (vmax - vmin)) * (CH - MT - MB);
    s.append(svg('title', null, ch.title));
    s.append(svg('text', { x: ML, y: 18, class: 'ctitle' }, ch.title));
    // Grid and axes.
    for (const f of [0.25, 0.5, 0.75]) s.append(svg('line', { x1: ML, x2: CW - MR, y1: y(vmax * f), y2: y(vmax * f), class: 'grid' }));
    s.append(svg('line', { x1: ML, x2: ML, y1: MT, y2: CH - MB, class: 'axis' }));
    s.append(svg('line', { x1: ML, x2: CW - MR, y1: CH - MB, y2: CH - MB, class: 'axis' }));
    s.append(svg('text', { x: ML - 6, y: y(vmax) + 4, class: 'ylabel' }, fmtAxis(vmax)));
    s.append(svg('text', { x: ML - 6, y: y(vmin) + 4, class: 'ylabel' }, fmtAxis(vmin)));
    s.append(svg('text', { x: ML - 6, y: y(vmax / 2) + 4, class: 'ylabel faint' }, fmtAxis(vmax / 2)));
    if (all.length) {
      s.append(svg('text', { x: ML, y: CH - MB + 18, class: 'xlabel start' }, fmtClock(t0)));
      s.append(svg('text', { x: CW - MR, y: CH - MB + 18, class: 'xlabel end' }, fmtClock(t1)));
      s.append(svg('text', { x: (ML + CW - MR) / 2, y: CH - MB + 18, class: 'xlabel mid faint' }, fmtDuration(t1 - t0) + ' shown'));
    } else {
      s.append(svg('text', { x: (ML + CW - MR) / 2, y: (MT + CH - MB) / 2, class: 'nodata' }, 'no samples yet'));
    }
    const legend = box.legend;
    clear(legend);
    const summary = [];
    for (const se of series) {
      if (se.pts.length) {
        const pts = se.pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
        const last = se.pts[se.pts.length - 1][1];
        const line = svg('polyline', { points: pts, class: `series ${se.cls}${se.dashed ? ' dashed' : ''}`, 'data-server': se.id },
          svg('title', null, `${se.label}: ${fmtAxis(last)}${ch.unit} now`));
        s.append(line);
        if (se.pts.length === 1) s.append(svg('circle', { cx: x(se.pts[0][0]), cy: y(se.pts[0][1]), r: 2.5, class: `dot ${se.cls}` }));
        summary.push(`${se.label} ${fmtAxis(last)}${ch.unit}`);
      }
      if (se.dashed) continue; // one legend entry per server
      legend.append(el('li', null, el('span', { class: 'swatch ' + se.cls, 'aria-hidden': 'true' }),
        se.id + (se.pts.length ? ' ' + fmtAxis(se.pts[se.pts.length - 1][1]) + ch.unit : '')));
    }
    if (ch.note) legend.append(el('li', { class: 'note', text: ch.note }));
    s.setAttribute('aria-label', `${ch.title}${ch.note ? ' (' + ch.note + ')' : ''}. Latest: ${summary.join(', ') || 'no samples'}.`);
  }

  function fmtAxis(v) {
    if (v == null || !Number.isFinite(v)) return '—';
    if (Number.isInteger(v) && Math.abs(v) < 1000) return String(v);
    if (Math.abs(v) >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k';
    if (Math.abs(v) >= 100) return v.toFixed(0);
    if (Math.abs(v) >= 10) return String(Number(v.toFixed(1)));
    if (Math.abs(v) >= 1) return v.toFixed(1);
    return v.toFixed(2);
  }

  // ===================================================================
  // Sessions view (admin)
  // ===================================================================

  const ss = { timer: null, gen: 0, rows: new Map() };

  function startSessions() {
    stopSessions();
    const gen = ++ss.gen;
    if (!state.me.admin) {
      showError('sessions-error', 'Sessions are shown only to the admin identity.');
      clear($('session-list').tBodies[0]);
      ss.rows.clear();
      return Promise.resolve();
    }
    return pollSessions(gen);
  }
  function stopSessions() { ss.gen++; clearTimeout(ss.timer); ss.timer = null; }

  async function pollSessions(gen) {
    if (gen !== ss.gen) return;
    try {
      const res = await api('/ui/api/sessions');
      if (gen !== ss.gen) return;
      renderSessions(res.sessions || []);
      showError('sessions-error', '');
    } catch (e) {
      if (gen !== ss.gen || !state.me) return;
      showError('sessions-error', e.code === 'Forbidden' ? 'Sessions are shown only to the admin identity.' : errText(e));
    } finally {
      if (gen === ss.gen && state.me) { clearTimeout(ss.timer); ss.timer = setTimeout(() => pollSessions(gen), 5000); }
    }
  }

  function renderSessions(list) {
    const body = $('session-list').tBodies[0];
    const seen = new Set();
    list = [...list].sort((a, b) => String(a.server).localeCompare(String(b.server)) || String(a.id).localeCompare(String(b.id)));
    for (const s of list) {
      seen.add(s.id);
      let r = ss.rows.get(s.id);
      if (!r) {
        r = { tr: el('tr', { 'data-session': s.id }) };
        r.id = el('th', { scope: 'row', class: 'id mono', text: s.id });
        r.server = el('td', { class: 'server mono' });
        r.timeout = el('td', { class: 'timeout num' });
        r.ephemerals = el('td', { class: 'ephemerals num' });
        r.watches = el('td', { class: 'watches num' });
        r.console = el('td', { class: 'console' });
        r.close = el('button', { type: 'button', class: 'close small danger', text: 'Close' });
        r.close.addEventListener('click', () => closeSession(s.id));
        r.tr.append(r.id, r.server, r.timeout, r.ephemerals, r.watches, r.console, el('td', null, r.close));
        ss.rows.set(s.id, r);
      }
      body.append(r.tr);
      const mine = state.me && s.id === state.me.session;
      setText(r.server, s.server);
      setText(r.timeout, s.timeout_ms != null ? fmtDuration(s.timeout_ms) : '—');
      r.timeout.title = s.timeout_ms != null ? s.timeout_ms + ' ms' : '';
      setText(r.ephemerals, fmtNum(s.ephemerals));
      setText(r.watches, s.watches == null ? '—' : String(s.watches));
      r.watches.title = s.watches == null ? 'not reported by that server' : '';
      setText(r.console, s.console ? (mine ? 'console (you)' : 'console') : '');
      r.tr.classList.toggle('mine', !!mine);
      r.close.setAttribute('aria-label', `Close session ${s.id}`);
    }
    for (const [id, r] of ss.rows) if (!seen.has(id)) { r.tr.remove(); ss.rows.delete(id); }
    setText('sessions-count', `${list.length} session${list.length === 1 ? '' : 's'}`);
  }

  async function closeSession(id) {
    const mine = state.me && id === state.me.session;
    const r = ss.rows.get(id);
    const eph = r ? r.ephemerals.textContent : '?';
    if (!await confirmAction(`Close session ${id}? Its ${eph} ephemeral node(s) are deleted and its client has to reconnect with a new session.` +
      (mine ? ' It is this console\'s own session: you will be signed out.' : ''), { title: 'Close session', ok: 'Close session' })) return;
    try {
      await post('/ui/api/sessions/close', { id });
      status(`Session ${id} closed.`, 'ok');
    } catch (e) {
      if (!state.me) return;
      status(errText(e), 'error');
      showError('sessions-error', errText(e));
    }
    if (state.view === 'sessions') startSessions();
  }

  // ===================================================================
  // Boot: wire up the static page, then ask who we are
  // ===================================================================

  function setup() {
    $('login').addEventListener('submit', (e) => {
      e.preventDefault();
      login($('login-user').value.trim(), $('login-password').value);
    });
    $('login-anonymous').addEventListener('click', () => login('', ''));
    $('logout').addEventListener('click', logout);
    window.addEventListener('hashchange', route);

    $('tree').addEventListener('keydown', onTreeKey);
    $('search').addEventListener('input', searchSoon);
    $('search').addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); runSearch(); }
      if (e.key === 'Escape' && $('search').value) { e.preventDefault(); $('search').value = ''; runSearch(); }
    });
    $('search-mode').addEventListener('change', runSearch);

    $('data-format').addEventListener('change', onFormatChange);
    $('node-data').addEventListener('input', updateDirty);
    $('node-save').addEventListener('click', saveNode);
    $('node-reload').addEventListener('click', reloadNode);
    $('node-create').addEventListener('click', openCreate);
    $('node-delete').addEventListener('click', deleteNode);
    $('node-copy').addEventListener('click', () => openCopy(false));
    $('node-move').addEventListener('click', () => openCopy(true));
    $('node-export').addEventListener('click', exportNode);
    $('node-import').addEventListener('click', () => $('import-file').click());
    $('import-file').addEventListener('change', importFile);
    $('node-acl-edit').addEventListener('click', openAcl);
    $('node-data').addEventListener('keydown', (e) => {
      if ((e.ctrlKey || e.metaKey) && e.key === 's') { e.preventDefault(); saveNode(); }
    });
    $('sessions-refresh').addEventListener('click', () => startSessions());
    setupDialogs();
    setInterval(tickRelTimes, 15000);
  }

  async function boot() {
    setup();
    try {
      const me = await api('/ui/api/me', { noExpire: true });
      startApp(me);
    } catch (e) {
      showSignin(e.status === 401 ? '' : errText(e));
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
  else boot();
})();
