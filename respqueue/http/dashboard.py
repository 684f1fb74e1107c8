"""The dashboard page served at ``/``: one self-contained HTML document (inline CSS and JS, SVG charts drawn
by hand, nothing from a CDN). It reads the JSON API that compat/dashboard.py registers (``/api/overview``
every 5 s, ``/api/job`` for a timeline) and posts actions to ``/api/action``."""

from __future__ import annotations

from .. import __version__

_PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>respqueue dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
:root{--bg:#f6f7f9;--card:#fff;--ink:#1d2330;--mute:#6b7385;--line:#e2e5eb;--ok:#2f9e62;--bad:#d64545;
--acc:#3366cc;--warn:#c98a0b}
*{box-sizing:border-box}body{margin:0;font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;
background:var(--bg);color:var(--ink)}header{display:flex;align-items:baseline;gap:16px;padding:14px 24px;
background:#1d2330;color:#fff}header h1{font-size:18px;margin:0}header span{color:#aab;font-size:12px}
main{padding:16px 24px;display:grid;gap:16px;grid-template-columns:1fr 1fr}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 16px;min-width:0}
section.wide{grid-column:1/-1}h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;width:100%}th,td{text-align:right;padding:4px 8px;border-bottom:1px solid var(--line);
white-space:nowrap}th:first-child,td:first-child,td.l,th.l{text-align:left}th{color:var(--mute);font-weight:600;
font-size:12px}td.n0{color:#b8bdc8}.paused{color:var(--warn);font-weight:600}
button{font:inherit;font-size:12px;padding:2px 8px;border:1px solid var(--line);border-radius:4px;background:#fff;
cursor:pointer}button:hover{border-color:var(--acc);color:var(--acc)}button.danger:hover{border-color:var(--bad);
color:var(--bad)}.reason{color:var(--bad);font-weight:600;white-space:normal}details pre{margin:4px 0;
font-size:11px;background:#f3f4f7;padding:6px;overflow:auto;max-height:160px}.mute{color:var(--mute)}
.legend span{display:inline-block;margin-right:12px;font-size:12px}.legend i{display:inline-block;width:10px;
height:10px;margin-right:4px;border-radius:2px}svg text{font-size:10px;fill:var(--mute)}
#msg{position:fixed;right:16px;bottom:16px;background:#1d2330;color:#fff;padding:8px 12px;border-radius:6px;
display:none}form input{font:inherit;padding:2px 6px;border:1px solid var(--line);border-radius:4px;width:120px}
ol.tl{list-style:none;margin:8px 0;padding:0 0 0 12px;border-left:2px solid var(--line)}ol.tl li{margin:0 0 6px;
position:relative}ol.tl li:before{content:"";position:absolute;left:-18px;top:5px;width:10px;height:10px;
border-radius:50%;background:var(--acc)}ol.tl li.failed:before,ol.tl li.retried:before{background:var(--bad)}
ol.tl li.completed:before{background:var(--ok)}.scroll{max-height:330px;overflow:auto}
</style></head><body>
<header><h1>respqueue</h1><span id="ver">v__VERSION__</span><span id="updated">loading...</span></header>
<main>
<section class="wide"><h2>Queues</h2><table id="queues"><thead><tr><th>queue</th><th>wait</th><th>active</th>
<th>delayed</th><th>prioritized</th><th>waiting-children</th><th>paused</th><th>completed</th><th>failed</th>
<th>oldest waiting</th><th class="l">actions</th></tr></thead><tbody></tbody></table></section>
<section><h2>Throughput (jobs per 10 s, last 15 min)</h2><div class="legend"><span><i style="background:#2f9e62">
</i>completed</span><span><i style="background:#d64545"></i>failed</span><span><i style="background:#3366cc"></i>added
</span></div><div id="chart-tp"></div></section>
<section><h2>Failure rate (failed / finished, per 10 s)</h2><div id="chart-fr"></div></section>
<section class="wide"><h2>Wait and run times (last 1,000 finished jobs per queue, seconds)</h2>
<table id="pct"><thead><tr><th>queue</th><th>added</th><th>completed</th><th>failed</th><th>retried</th>
<th>wait p50</th><th>wait p95</th><th>wait p99</th><th>run p50</th><th>run p95</th><th>run p99</th></tr></thead>
<tbody></tbody></table></section>
<section class="wide"><h2>Latest failures</h2><div class="scroll"><table id="failures"><thead><tr><th>queue</th><th>job</th>
<th class="l">name</th><th class="l">reason</th><th>attempts</th><th>failed at</th><th class="l">actions</th></tr>
</thead><tbody></tbody></table></div></section>
<section><h2>Delayed jobs</h2><table id="delayed"><thead><tr><th>queue</th><th>job</th><th class="l">name</th>
<th>due</th><th class="l">actions</th></tr></thead><tbody></tbody></table></section>
<section><h2>Job timeline</h2><form id="lookup">queue <input id="lq" placeholder="queue"> job <input id="lj"
placeholder="id"> <button>show</button></form><div id="timeline" class="mute">Pick a job (click its id).</div>
</section>
</main><div id="msg"></div>
<script>
"use strict";
const $=s=>document.querySelector(s);
const esc=v=>String(v==null?"":v).replace(/[&<>"']/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
const num=n=>n==null?"-":(typeof n==="number"&&!Number.isInteger(n)?n.toFixed(3):String(n));
const hm=ms=>{const d=new Date(ms);return d.getHours()+":"+String(d.getMinutes()).padStart(2,"0");};
const when=ms=>ms?new Date(ms).toLocaleTimeString():"-";
const ago=s=>s==null?"-":(s<60?s.toFixed(1)+" s":s<3600?(s/60).toFixed(1)+" min":(s/3600).toFixed(1)+" h");
function qid(o){return JSON.stringify({db:o.db,prefix:o.prefix,queue:o.queue});}
function qname(o){return (o.prefix!=="bull"?o.prefix+":":"")+o.queue+(o.db?" (db "+o.db+")":"");}
function flash(t){const m=$("#msg");m.textContent=t;m.style.display="block";clearTimeout(flash.t);
flash.t=setTimeout(()=>m.style.display="none",4000);}
async function act(action,q,extra){
  const body=Object.assign({action:action},JSON.parse(q),extra||{});
  if((action==="clean"||action==="remove")&&!confirm(action+" "+(body.id||body.state)+" in "+body.queue+"?"))return;
  const r=await fetch("/api/action",{method:"POST",headers:{"Content-Type":"application/json"},
    body:JSON.stringify(body),credentials:"same-origin"});
  const j=await r.json().catch(()=>({error:r.statusText}));
  flash(r.ok?action+": done":action+" failed: "+(j.error||r.status));refresh();
}
function bars(points,keys,colors){
  const W=560,H=150,P=36,n=points.length;let max=1;
  for(const p of points)for(const k of keys)max=Math.max(max,p[k]);max=Math.ceil(max/4)*4;
  const bw=(W-P)/n;let s='<svg viewBox="0 0 '+W+' '+H+'" width="100%" role="img">';
  for(let g=0;g<=4;g++){const y=H-16-(H-24)*g/4;s+='<line x1="'+P+'" x2="'+W+'" y1="'+y+'" y2="'+y+
    '" stroke="#eef0f4"/><text x="'+(P-4)+'" y="'+(y+3)+'" text-anchor="end">'+Math.round(max*g/4)+'</text>';}
  points.forEach((p,i)=>{keys.forEach((k,j)=>{const h=(H-24)*p[k]/max;const w=bw/keys.length;
    s+='<rect x="'+(P+i*bw+j*w)+'" y="'+(H-16-h)+'" width="'+Math.max(1,w-0.5)+'" height="'+h+'" fill="'+colors[j]+'"/>';});
    if(i%18===0)s+='<text x="'+(P+i*bw)+'" y="'+(H-3)+'">'+hm(p[0])+'</text>';});
  return s+'</svg>';
}
function line(points){
  const W=560,H=150,P=36,n=points.length;let s='<svg viewBox="0 0 '+W+' '+H+'" width="100%" role="img">';
  for(let g=0;g<=4;g++){const y=H-16-(H-24)*g/4;s+='<line x1="'+P+'" x2="'+W+'" y1="'+y+'" y2="'+y+
    '" stroke="#eef0f4"/><text x="'+(P-4)+'" y="'+(y+3)+'" text-anchor="end">'+(25*g)+'%</text>';}
  let d="";points.forEach((p,i)=>{const fin=p[2]+p[3];if(!fin)return;const x=P+(i+0.5)*(W-P)/n;
    const y=H-16-(H-24)*p[3]/fin;d+=(d?"L":"M")+x.toFixed(1)+" "+y.toFixed(1);
    s+='<circle cx="'+x.toFixed(1)+'" cy="'+y.toFixed(1)+'" r="2" fill="#d64545"/>';});
  if(d)s+='<path d="'+d+'" fill="none" stroke="#d64545" stroke-width="1.5"/>';
  else s+='<text x="'+(W/2)+'" y="'+(H/2)+'" text-anchor="middle">no finished jobs yet</text>';
  return s+'</svg>';
}
function render(o){
  $("#updated").textContent="updated "+new Date(o.now).toLocaleTimeString()+(o.history?"":" (job history off)");
  const qs=o.queues;let h="";
  for(const q of qs){const c=q.counts,id=esc(qid(q));
    h+='<tr data-queue="'+esc(q.queue)+'"><td>'+esc(qname(q))+(q.paused?' <span class="paused">paused</span>':'')+'</td>';
    for(const k of ["wait","active","delayed","prioritized","waiting-children","paused","completed","failed"])
      h+='<td class="c-'+k+(c[k]?'':' n0')+'">'+c[k]+'</td>';
    h+='<td>'+ago(q.oldest_wait_s)+'</td><td class="l">'+(q.paused?'<button data-a="resume" data-q="'+id+'">resume</button>':
      '<button data-a="pause" data-q="'+id+'">pause</button>')+' <button class="danger" data-a="clean" data-s="completed" data-q="'+
      id+'">clean completed</button> <button class="danger" data-a="clean" data-s="failed" data-q="'+id+'">clean failed</button></td></tr>';}
  $("#queues tbody").innerHTML=h||'<tr><td class="mute" colspan="11">no BullMQ queues yet</td></tr>';
  const pts=o.series.points.slice(-90);
  $("#chart-tp").innerHTML=bars(pts,[2,3,1],["#2f9e62","#d64545","#3366cc"]);
  $("#chart-fr").innerHTML=line(pts);
  h="";for(const q of qs){const t=q.totals||{},w=q.wait||{},r=q.run||{};
    h+='<tr><td>'+esc(qname(q))+'</td><td>'+num(t.added)+'</td><td>'+num(t.completed)+'</td><td>'+num(t.failed)+
    '</td><td>'+num(t.retried)+'</td><td>'+num(w.p50)+'</td><td>'+num(w.p95)+'</td><td>'+num(w.p99)+'</td><td>'+
    num(r.p50)+'</td><td>'+num(r.p95)+'</td><td>'+num(r.p99)+'</td></tr>';}
  $("#pct tbody").innerHTML=h;
  h="";for(const f of o.failures){const id=esc(qid(f));
    h+='<tr class="failure"><td>'+esc(qname(f))+'</td><td><a href="#" data-job="'+esc(f.id)+'" data-q="'+id+'">'+esc(f.id)+
    '</a></td><td class="l">'+esc(f.name)+'</td><td class="l reason">'+esc(f.failedReason)+
    (f.stacktrace&&f.stacktrace.length?'<details><summary class="mute">stack trace</summary><pre>'+
    esc(f.stacktrace.join("\n---\n"))+'</pre></details>':'')+'</td><td>'+num(f.attemptsMade)+'</td><td>'+
    when(f.finishedOn)+'</td><td class="l"><button data-a="retry" data-id="'+esc(f.id)+'" data-q="'+id+
    '">retry</button> <button class="danger" data-a="remove" data-id="'+esc(f.id)+'" data-q="'+id+'">remove</button></td></tr>';}
  $("#failures tbody").innerHTML=h||'<tr><td class="mute" colspan="7">no failed jobs</td></tr>';
  h="";for(const d of o.delayed){const id=esc(qid(d));
    h+='<tr class="delayed"><td>'+esc(qname(d))+'</td><td><a href="#" data-job="'+esc(d.id)+'" data-q="'+id+'">'+esc(d.id)+
    '</a></td><td class="l">'+esc(d.name)+'</td><td>'+when(d.dueOn)+'</td><td class="l"><button data-a="promote" data-id="'+
    esc(d.id)+'" data-q="'+id+'">promote</button> <button class="danger" data-a="remove" data-id="'+esc(d.id)+
    '" data-q="'+id+'">remove</button></td></tr>';}
  $("#delayed tbody").innerHTML=h||'<tr><td class="mute" colspan="5">no delayed jobs</td></tr>';
}
async function timeline(q,id){
  const p=Object.assign(JSON.parse(q),{id:id});const r=await fetch("/api/job?"+new URLSearchParams(p));
  const j=await r.json();if(!r.ok){$("#timeline").textContent=j.error||r.statusText;return;}
  let h='<div><b>'+esc(p.queue)+' / '+esc(id)+'</b>'+(j.job?' <span class="mute">state '+esc(j.job.state)+', name '+
    esc(j.job.name)+'</span>':' <span class="mute">(no longer in the keyspace)</span>')+'</div>';
  if(j.note)h+='<div class="mute">'+esc(j.note)+'</div>';
  h+='<ol class="tl">';for(const e of j.timeline){h+='<li class="'+esc(e.event)+'"><b>'+esc(e.event)+'</b> <span class="mute">'+
    new Date(e.ts_ms).toLocaleTimeString()+(e.attempt?' attempt '+e.attempt:'')+(e.worker?' on '+esc(e.worker):'')+
    (e.delay_ms?' delay '+e.delay_ms+' ms':'')+'</span>'+(e.failed_reason?' <span class="reason">'+esc(e.failed_reason)+
    '</span>':'')+'</li>';}
  $("#timeline").innerHTML=h+'</ol>';
}
document.addEventListener("click",ev=>{const b=ev.target.closest("button[data-a]");
  if(b){ev.preventDefault();act(b.dataset.a,b.dataset.q,b.dataset.id?{id:b.dataset.id}:b.dataset.s?{state:b.dataset.s}:{});return;}
  const a=ev.target.closest("a[data-job]");if(a){ev.preventDefault();timeline(a.dataset.q,a.dataset.job);}});
$("#lookup").addEventListener("submit",ev=>{ev.preventDefault();
  timeline(JSON.stringify({db:0,prefix:"bull",queue:$("#lq").value}),$("#lj").value);});
async function refresh(){try{const r=await fetch("/api/overview",{credentials:"same-origin"});
  if(r.ok)render(await r.json());else $("#updated").textContent="error "+r.status;}
  catch(e){$("#updated").textContent="server unreachable";}}
refresh();setInterval(refresh,5000);
{const m=/^#(.+)\/([^\/]+)$/.exec(decodeURIComponent(location.hash));  // #queue/job opens its timeline
 if(m){$("#lq").value=m[1];$("#lj").value=m[2];timeline(JSON.stringify({db:0,prefix:"bull",queue:m[1]}),m[2]);}}
</script></body></html>
"""


def page() -> bytes:
    """The dashboard document."""
    return _PAGE.replace("__VERSION__", __version__).encode()
