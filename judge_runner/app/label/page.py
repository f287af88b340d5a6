"""The labelling page of ``judge-runner label``: one self-contained HTML document (inline CSS and script, a
Content-Security-Policy nonce), keyboard first. Everything from a run file is untrusted and set with
``textContent`` only, never as markup. Each tab has its own id, so undo takes back that tab's last grade
only. The grade buttons show the judge's rubric in its words (``prompts/judge_rubric.md``).
"""

from __future__ import annotations

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>judge-runner label</title>
<style nonce="__NONCE__">
:root{--ink:#1d2733;--soft:#5a6b80;--line:#d5dce5;--accent:#2f6fdf;--bg:#fbfcfe}
*{box-sizing:border-box}
body{font:17px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:var(--bg);margin:0}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:.6rem 1.2rem;z-index:1}
header h1{font-size:1rem;margin:0 0 .35rem 0;font-weight:600}
#bar{height:.55rem;background:#e6ebf2;border-radius:.3rem;overflow:hidden}
#fill{height:100%;width:0;background:var(--accent);transition:width .15s}
#stats{font-size:.85rem;color:var(--soft);margin-top:.3rem;display:flex;gap:1.2rem;flex-wrap:wrap}
#fast,#cache{color:#8a5a00}
main{max-width:60rem;margin:0 auto;padding:1rem 1.2rem 6rem}
.place{font-size:.85rem;color:var(--soft)}
#query{font-size:1.35rem;margin:.2rem 0 .2rem}
#intent{margin:0 0 1rem;color:var(--soft)}
#doc{background:#fff;border:1px solid var(--line);border-radius:.5rem;padding:.8rem 1rem}
#source{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9rem;word-break:break-all}
#anchor{font-weight:600;margin:.2rem 0 .5rem}
#text{white-space:pre-wrap;word-wrap:break-word;font:inherit;margin:0;max-height:55vh;overflow:auto}
#textfrom{font-size:.8rem;color:#8a5a00;margin-top:.4rem}
#scale{display:grid;grid-template-columns:repeat(4,1fr);gap:.6rem;margin:1rem 0}
#scale button{font:inherit;text-align:left;border:1px solid var(--line);border-radius:.5rem;background:#fff;padding:.6rem;cursor:pointer}
#scale button:hover,#scale button:focus{border-color:var(--accent);outline:none}
#scale b{display:block;font-size:1.1rem}
#scale span{display:block;font-size:.85rem;color:var(--soft)}
#keys{font-size:.85rem;color:var(--soft)}
#rubric{margin:.8rem 0;font-size:.9rem;border:1px solid var(--line);border-radius:.5rem;background:#fff;padding:.4rem .8rem}
#rubric summary{cursor:pointer;color:var(--accent)}
#rubric h3{font-size:.95rem;margin:.7rem 0 .2rem}
#rubric p{margin:.2rem 0}
#rubric ul{margin:.2rem 0;padding-left:1.2rem}
kbd{border:1px solid var(--line);border-bottom-width:2px;border-radius:.25rem;padding:0 .3rem;background:#fff;font-family:inherit}
#message{min-height:1.5rem;color:#b3261e;margin-top:.5rem}
#done{max-width:60rem;margin:2rem auto;padding:0 1.2rem}
@media (max-width:700px){#scale{grid-template-columns:repeat(2,1fr)}}
</style></head>
<body>
<header>
<h1>Labelling <span id="name"></span></h1>
<div id="bar" role="progressbar" aria-valuemin="0" aria-valuemax="100"><div id="fill"></div></div>
<div id="stats"><span id="count"></span><span id="pace"></span><span id="fast"></span><span id="cache"></span><span id="advice"></span></div>
</header>
<main id="work">
<div class="place" id="place"></div>
<h2 id="query"></h2>
<p id="intent"></p>
<article id="doc">
<div id="source"></div>
<div id="anchor"></div>
<pre id="text"></pre>
<div id="textfrom"></div>
</article>
<div id="scale"></div>
<details id="rubric"><summary>How to grade: the rubric the judge is given, word for word</summary><div id="rubricbody"></div></details>
<div id="keys"><kbd>0</kbd>-<kbd>3</kbd> label and go on &middot; <kbd>s</kbd> or <kbd>&rarr;</kbd> skip (it comes back at the end)
&middot; <kbd>u</kbd> or <kbd>Backspace</kbd> undo this tab's last label &middot; every label is saved the moment you give it</div>
<div id="message" role="status"></div>
</main>
<section id="done" hidden>
<h2>All labelled</h2>
<p id="donetext"></p>
<p>You can close this tab. Press Ctrl+C in the terminal to stop the server; <kbd>u</kbd> still undoes this tab's last label.</p>
</section>
<script nonce="__NONCE__">
"use strict";
const base = location.pathname.replace(/\\/+$/, "");
const $ = (id) => document.getElementById(id);
let state = null, busy = false;
const tab = (() => {
  const fresh = () => {
    const bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);
    return "tab-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  };
  try {
    let id = sessionStorage.getItem("judge-runner-label-tab");
    if (!id || !/^[A-Za-z0-9_-]{8,64}$/.test(id)) { id = fresh(); sessionStorage.setItem("judge-runner-label-tab", id); }
    return id;
  } catch (e) {
    return fresh();
  }
})();

function say(text) { $("message").textContent = text || ""; }

function clock(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 90) return Math.round(seconds) + " s";
  return Math.round(seconds / 60) + " min";
}

function render(s) {
  state = s;
  $("name").textContent = s.name;
  const p = s.progress;
  $("fill").style.width = (p.total ? (100 * p.labelled / p.total) : 0) + "%";
  $("bar").setAttribute("aria-valuenow", String(p.total ? Math.round(100 * p.labelled / p.total) : 0));
  $("count").textContent = p.labelled + " of " + p.total + " labelled" + (p.skipped ? " \\u00b7 " + p.skipped + " skipped" : "");
  $("pace").textContent = p.secondsPerLabel === null ? "" : clock(p.secondsPerLabel) + " per label \\u00b7 about " + clock(p.secondsLeft) + " left";
  $("advice").textContent = s.recommended ? s.recommended : "";
  $("fast").textContent = p.fast ? p.fast + (p.fast === 1 ? " label" : " labels") + " given in under " + p.fastFloorSeconds + " s: flagged \u201cfast\u201d in the journal" : "";
  const c = s.cache;
  $("cache").textContent = c.state === "locked" ? "The judgment cache is locked by another process: every label is saved in the journal and goes into the cache when it frees."
    : c.state === "failed" ? "The judgment cache cannot take the labels (" + c.message + "): they are saved in the journal." : "";
  const scale = $("scale");
  if (!scale.childElementCount) {
    for (const g of s.scale) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.grade = String(g.grade);
      const head = document.createElement("b");
      head.textContent = g.grade + " \\u00b7 " + g.name;
      const meaning = document.createElement("span");
      meaning.textContent = g.meaning;
      b.append(head, meaning);
      b.addEventListener("click", () => act("label", g.grade));
      scale.append(b);
    }
  }
  const rubric = $("rubricbody");
  if (!rubric.childElementCount && s.rubric) {
    for (const section of s.rubric) {
      const h = document.createElement("h3");
      h.textContent = section.heading;
      rubric.append(h);
      if (section.intro) {
        const p = document.createElement("p");
        p.textContent = section.intro;
        rubric.append(p);
      }
      const list = document.createElement("ul");
      for (const item of section.items) {
        const li = document.createElement("li");
        const title = document.createElement("b");
        title.textContent = item.title + " ";
        li.append(title, document.createTextNode(item.text));
        list.append(li);
      }
      rubric.append(list);
    }
  }
  $("work").hidden = s.done;
  $("done").hidden = !s.done;
  if (s.done) {
    const where = c.state === "current" ? " and in the judgment cache as the human qrels set " + s.name
      : c.state === "off" ? " (not imported into a judgment cache: --no-cache)"
      : c.state === "pending" ? "; the judgment cache is taking them" : "; not in the judgment cache yet (see above)";
    $("donetext").textContent = p.labelled + " labels are in " + s.journalFile + " and " + s.qrelsFile + where + ".";
    return;
  }
  const item = s.item, place = s.place;
  $("place").textContent = "Query " + place.query + " of " + place.queries + " \\u00b7 document " + place.document + " of " + place.documents;
  $("query").textContent = item.query;
  $("intent").textContent = item.intent ? "Intent: " + item.intent : "";
  $("source").textContent = item.source;
  $("anchor").textContent = item.anchor || "";
  $("text").textContent = item.text;
  $("text").scrollTop = 0;
  $("textfrom").textContent = item.textFrom === "snippet" ? "Only the snippet is shown: this run file does not hold the text the judge read." : "";
}

async function call(path, body) {
  const response = await fetch(base + path + (body === undefined ? "?tab=" + tab : ""), body === undefined ? {cache: "no-store"} : {
    method: "POST", cache: "no-store", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const data = await response.json();
  if (!response.ok) say(data.error || ("error " + response.status));
  if (data.state) return data.state;
  return data;
}

async function act(kind, grade) {
  if (busy || !state) return;
  if (kind !== "undo" && state.done) return;
  busy = true;
  try {
    say("");
    const body = kind === "undo" ? {tab: tab} : {item: state.item.id, tab: tab};
    if (kind === "label") body.grade = grade;
    render(await call("/api/" + kind, body));
  } catch (e) {
    say("Could not reach the labelling server: is it still running? (" + e + ")");
  } finally {
    busy = false;
  }
}

const KEYS = ["0", "1", "2", "3", "s", "ArrowRight", "u", "Backspace", "z"];
document.addEventListener("keydown", (e) => {
  if (e.altKey || e.metaKey || (e.ctrlKey && e.key !== "z")) return;
  if (e.repeat) { if (KEYS.includes(e.key)) e.preventDefault(); return; }  // a key held down counts once
  if (["0", "1", "2", "3"].includes(e.key)) { e.preventDefault(); act("label", Number(e.key)); }
  else if (e.key === "s" || e.key === "ArrowRight") { e.preventDefault(); act("skip"); }
  else if (e.key === "u" || e.key === "Backspace" || (e.ctrlKey && e.key === "z")) { e.preventDefault(); if (state && state.canUndo) act("undo"); }
});

call("/api/state").then(render).catch((e) => say("Could not load the labelling state (" + e + ")"));
</script>
</body></html>
"""


def page(nonce: str) -> str:
    """The page with ``nonce`` on its style and script."""
    return PAGE.replace("__NONCE__", nonce)
