-- page_assets: the inline styles and scripts of the catalogue page and of its public
-- shell (lua/page.lua puts each under the response's CSP nonce; the page loads no
-- external asset). Kept as Lua strings because a generation reads its runtime
-- directory's .lua files only: a reload picks up a change here like one in page.lua.
local M = {}

-- The catalogue: system fonts, light and dark, one column under 640 px.
M.catalogue_css = table.concat({
    ":root{--bg:#f6f7f9;--fg:#1d2330;--mut:#5d6575;--card:#fff;--line:#e2e5ea;--acc:#2f5bd3;",
    "--accbg:#eef2fd;--code:#f1f3f6}",
    "@media (prefers-color-scheme:dark){:root{--bg:#14171c;--fg:#e4e7ec;--mut:#9aa3b2;",
    "--card:#1c2028;--line:#2c323d;--acc:#8aa8ff;--accbg:#1f2940;--code:#232833}}",
    "*{box-sizing:border-box}",
    "body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.55 system-ui,-apple-system,",
    "'Segoe UI',Roboto,'Noto Sans','PingFang SC','Microsoft YaHei',sans-serif}",
    "main{max-width:1080px;margin:0 auto;padding:28px 20px 60px}",
    "header h1{margin:0 0 4px;font-size:26px}",
    "header .sub{color:var(--mut);margin:0 0 18px}",
    ".badge{display:inline-block;background:var(--accbg);color:var(--acc);border-radius:999px;",
    "padding:1px 10px;font-size:13px;font-weight:600;vertical-align:middle;margin-left:6px}",
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:6px 16px;margin:0;",
    "background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 18px}",
    "dl.facts dt{color:var(--mut)}dl.facts dd{margin:0;overflow-wrap:anywhere}",
    "code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}",
    "code{background:var(--code);border-radius:4px;padding:1px 5px}",
    "h2{font-size:20px;margin:34px 0 12px;padding-bottom:6px;border-bottom:1px solid var(--line)}",
    "h2 .gid{color:var(--mut);font-weight:400;font-size:14px;margin-left:8px}",
    -- one config per row: a row is wide enough for a config's longest line on a desktop
    ".cfgs{display:grid;grid-template-columns:minmax(0,1fr);gap:14px}",
    ".cfg{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px;",
    "min-width:0}",
    ".cfgh{display:flex;justify-content:space-between;align-items:center;gap:8px;font-weight:600;",
    "margin-bottom:8px}",
    -- never wrapped: a break inside a JSON string (a URL, "Bearer <token>") would read as
    -- part of the value; a narrow screen scrolls the block sideways instead (the endpoint
    -- itself is also shown, wrapped, in the facts above, and Copy takes the whole text)
    "pre{background:var(--code);border-radius:8px;padding:10px 12px;margin:0;overflow-x:auto;",
    "white-space:pre;overflow-wrap:normal}",
    "button{font:inherit;font-size:13px;border:1px solid var(--acc);color:var(--acc);",
    "background:transparent;border-radius:6px;padding:3px 12px;cursor:pointer}",
    "button:hover{background:var(--accbg)}",
    ".note{color:var(--mut);font-size:13px;margin:8px 0 0}",
    "nav.toc{background:var(--card);border:1px solid var(--line);border-radius:10px;",
    "padding:12px 18px;margin-top:14px}",
    "nav.toc ul{margin:4px 0;padding-left:18px}nav.toc li{margin:2px 0}",
    "nav.toc .g{font-weight:600;margin-top:6px}",
    "nav.toc .cols{columns:3 240px;column-gap:24px}nav.toc .grp{break-inside:avoid}",
    "a{color:var(--acc);text-decoration:none}a:hover{text-decoration:underline}",
    "article.tool{background:var(--card);border:1px solid var(--line);border-radius:10px;",
    "padding:14px 18px;margin:12px 0}",
    "article.tool h3{margin:0;font-size:17px}",
    "article.tool .name{margin-left:8px;font-weight:400}",
    "article.tool .desc{white-space:pre-line;margin:8px 0 10px}",
    "article.tool h4{font-size:13px;text-transform:uppercase;letter-spacing:.04em;color:var(--mut);",
    "margin:12px 0 6px}",
    ".tw{overflow-x:auto}",
    "table{border-collapse:collapse;width:100%;font-size:14px}",
    "th,td{text-align:left;vertical-align:top;padding:6px 8px;border-bottom:1px solid var(--line)}",
    "th{color:var(--mut);font-weight:600;font-size:13px}",
    "td.ty{color:var(--acc);white-space:nowrap;font-family:ui-monospace,Menlo,Consolas,monospace;",
    "font-size:13px}",
    "td.rq{color:#c2410c;white-space:nowrap}",
    "tr.d1 td:first-child{padding-left:22px}tr.d2 td:first-child{padding-left:38px}",
    "tr.d3 td:first-child{padding-left:54px}",
    ".meta{color:var(--mut);font-size:13px;margin-top:2px}",
    ".none{color:var(--mut);margin:4px 0}",
    "details{margin-top:8px}summary{cursor:pointer;color:var(--mut);font-size:14px}",
    "details h5{margin:10px 0 4px;font-size:14px}",
    "footer{color:var(--mut);font-size:13px;margin-top:36px}",
    "@media (max-width:640px){main{padding:18px 12px 40px}dl.facts{grid-template-columns:1fr}",
    "dl.facts dt{margin-top:6px}td.ty{white-space:normal}}",
})

-- Copy buttons: the Clipboard API where the page is a secure context, else the
-- execCommand fallback (plain http on a LAN address).
M.catalogue_js = table.concat({
    "document.addEventListener('click',function(e){",
    "var b=e.target.closest('button[data-copy]');if(!b)return;",
    "var t=document.getElementById(b.getAttribute('data-copy')).textContent;",
    "function done(){b.textContent=b.getAttribute('data-done');",
    "setTimeout(function(){b.textContent=b.getAttribute('data-label');},1500);}",
    "function fallback(){var a=document.createElement('textarea');a.value=t;",
    "a.setAttribute('readonly','');a.style.position='fixed';a.style.top='-1000px';",
    "document.body.appendChild(a);a.select();",
    "try{if(document.execCommand('copy'))done();}catch(x){}document.body.removeChild(a);}",
    "if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t)",
    ".then(done,fallback);}else{fallback();}});",
})

-- The shell: a centred card with the token form.
M.shell_css = table.concat({
    "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1c2430}",
    "main{max-width:36rem;margin:12vh auto;padding:2rem;background:#fff;border-radius:12px;",
    "box-shadow:0 2px 12px rgba(0,0,0,.08)}",
    "h1{font-size:1.4rem;margin:0 0 .5rem}",
    "label{display:block;margin:1rem 0 .3rem;font-weight:600}",
    "input{width:100%;box-sizing:border-box;padding:.6rem;font:inherit;border:1px solid #c8ced8;",
    "border-radius:8px}",
    "button{margin-top:1rem;padding:.6rem 1.2rem;font:inherit;border:0;border-radius:8px;",
    "background:#2855d8;color:#fff;cursor:pointer}",
    "#err{color:#b3261e;min-height:1.5em}",
})

-- The shell's script: fetches this same URL with the typed token in the Authorization
-- header (never in the URL; credentials omitted; kept in memory only) and shows the
-- catalogue in place. The catalogue's styles and scripts get the shell's nonce, so the
-- shell's CSP (which also allows fetch to 'self') covers them. A refused token shows
-- the text of the error element's data-<status> attribute.
M.shell_js = table.concat({
    "(function(){var nonce=document.currentScript.nonce;",
    "document.getElementById('f').addEventListener('submit',function(e){e.preventDefault();",
    "var err=document.getElementById('err');err.textContent='';",
    "var tok=document.getElementById('t').value.trim();",
    "fetch(location.pathname,{headers:{'Authorization':'Bearer '+tok,'Accept':'text/html'},",
    "cache:'no-store',credentials:'omit'}).then(function(r){",
    "if(!r.ok){err.textContent=err.getAttribute('data-'+r.status)||('HTTP '+r.status);return null;}",
    "return r.text();}).then(function(html){if(!html)return;",
    "var d=new DOMParser().parseFromString(html,'text/html');",
    "d.querySelectorAll('style').forEach(function(s){s.setAttribute('nonce',nonce);});var scripts=[];",
    "d.querySelectorAll('script').forEach(function(s){scripts.push(s.textContent);s.remove();});",
    "document.replaceChild(document.adoptNode(d.documentElement),document.documentElement);",
    "scripts.forEach(function(t){var s=document.createElement('script');s.nonce=nonce;",
    "s.textContent=t;document.body.appendChild(s);});",
    "}).catch(function(x){err.textContent=String(x);});});})();",
})

return M
