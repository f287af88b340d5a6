"""The query-set card for people: as text lines at the end of phase one (:func:`card_lines`) and as
Markdown for the weekly report (:func:`card_markdown`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from judge_runner.core.mdtext import md_text
from judge_runner.core.query_card import QuerySetCard, SpreadRow
from judge_runner.querygen.profile import NO_LANGUAGE, ROOT_FOLDER

WIDTH = 100


def _name(kind: str, name: str) -> str:
    if kind == "folders":
        return name if name == ROOT_FOLDER else f"{name}/"
    if kind == "languages" and name == NO_LANGUAGE:
        return "no prose"
    return name


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def headline(card: QuerySetCard) -> str:
    """One sentence: queries kept of those written, dropped, and the corpus's size."""
    return (
        f"{card.kept} of {card.written} written queries kept ({card.written - card.kept} dropped); {card.corpusFiles} files in the corpus"
    )


def answerability_text(card: QuerySetCard) -> str:
    a = card.answerability
    if a is None:
        return "not checked (no judge)"
    cost = "unknown" if a.costUsd is None else f"${a.costUsd:.4f}"
    return (
        f"{a.checked} on-topic queries checked by {a.judge} ({a.judgeMode}): {a.verified} verified, {a.flagged} flagged "
        f"(kept unverified), {a.dropped} dropped, {a.unchecked} unchecked; {a.calls} judge calls, {a.labelsCached} labels "
        f"from the cache, cost {cost}"
    )


SPREAD_ROWS = 8
"""Rows per spread table in the terminal; the rest are counted on one line."""


def _spread_table(kind: str, rows: Sequence[SpreadRow], width: int) -> list[str]:
    """One aligned spread table, at most ``width`` wide."""
    name_width = max(12, min(width - 36, max(len(_name(kind, r.name)) for r in rows)))
    singular = kind[:-1]
    lines = [f"  {'by ' + singular:<{name_width + 2}} {'on-topic queries':>16} {'corpus files':>14}"]
    for r in rows[:SPREAD_ROWS]:
        name = _name(kind, r.name)
        name = name if len(name) <= name_width else name[: name_width - 1] + "…"
        lines.append(f"    {name:<{name_width}} {r.queries:>10} {r.queryShare:>5.0%} {r.corpusFiles:>8} {r.corpusShare:>5.0%}")
    if len(rows) > SPREAD_ROWS:
        rest = rows[SPREAD_ROWS:]
        lines.append(f"    … {len(rest)} more {kind}: {sum(r.queries for r in rest)} queries, {sum(r.corpusFiles for r in rest)} files")
    return lines


def card_lines(card: QuerySetCard, width: int = WIDTH) -> list[str]:
    """The card as text lines of at most ``width`` columns."""

    def wrap(text: str, indent: str = "  ") -> list[str]:
        return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "    ", break_on_hyphens=False) or [indent]

    lines = wrap(f"query-set card: {headline(card)}", "")
    lines += wrap("types: " + (", ".join(f"{t} {n}" for t, n in card.byType.items()) or "none"))
    s = card.spread
    for kind, rows in (("folders", s.folders), ("formats", s.formats), ("languages", s.languages)):
        if rows:
            lines += _spread_table(kind, rows, width)
    lines += [line for w in s.warnings for line in wrap(f"warning: {w}")]
    lines += wrap(f"answerability: {answerability_text(card)}")
    d = card.duplicates
    pairs = ", ".join(f"{p.dropped} repeats {p.kept}" + ("" if p.cosine is None else f" (cosine {p.cosine:.2f})") for p in d.pairs)
    lines += wrap(f"duplicates removed: {d.removed}" + (f": {pairs}" if pairs else "") + f" (threshold cosine {d.threshold:.2f})")
    n = card.nonSpecific
    said = ", ".join(f"{q.id} {q.action}" for q in n.queries)
    lines += wrap(f"non-specific: {n.flagged} flagged ({n.widened} widened, {n.dropped} dropped)" + (f": {said}" if said else ""))
    if card.leakage:
        lines += wrap(
            "leakage by type (mean / background / heading copies): "
            + "; ".join(f"{t.queryType} {_fmt(t.meanLeakage)} / {_fmt(t.meanBackground)} / {t.headingCopies}" for t in card.leakage)
        )
        lines += wrap(intent_text(card))
    lines += [line for q in card.dropped for line in wrap(f"dropped {q.id} ({q.check}): “{q.query}”: {q.reason}")]
    return lines


def intent_text(card: QuerySetCard) -> str:
    """The intents' line: their leakage by type and those over the copy limit, named."""
    over = [q.id for q in card.queries if "intent-copies-source" in q.flags]
    limit = "the limit" if card.intentCopyLimit is None else f"{card.intentCopyLimit:.0%} of their 5-grams"
    by_type = "; ".join(f"{t.queryType} {_fmt(t.meanIntentLeakage)}" for t in card.leakage)
    return f"intent leakage by type: {by_type}; {len(over)} intent(s) copy their expected source beyond {limit} or name it" + (
        f" (flagged: {', '.join(over[:10])}{' ...' if len(over) > 10 else ''})" if over else ""
    )


def card_markdown(card: QuerySetCard) -> list[str]:
    """The card as Markdown lines; every value from the file goes through :func:`md_text`."""
    t = md_text
    md = [f"{t(headline(card)[0].upper() + headline(card)[1:])}.", ""]
    md += ["| query type | queries | mean leakage | background | heading copies |", "|---|---|---|---|---|"]
    leak = {x.queryType: x for x in card.leakage}
    for query_type, count in card.byType.items():
        x = leak.get(query_type)
        md.append(
            f"| {t(query_type)} | {count} | {_fmt(x.meanLeakage) if x else '–'} | {_fmt(x.meanBackground) if x else '–'} | "
            f"{x.headingCopies if x else '–'} |"
        )
    md += [
        "",
        "Leakage: the share of a query's words (weighted by rarity) found in its expected source; background: the same share in "
        "an average other file. A set with high leakage flatters lexical search.",
        "",
        f"- **Intents**: {t(intent_text(card))}.",
        "",
    ]
    s = card.spread
    for kind, rows in (("folder", s.folders), ("format", s.formats), ("language", s.languages)):
        if not rows:
            continue
        md += [f"| {kind} | on-topic queries | share | corpus files | corpus share |", "|---|---|---|---|---|"]
        md += [
            f"| {t(_name(kind + 's', r.name))} | {r.queries} | {r.queryShare:.0%} | {r.corpusFiles} | {r.corpusShare:.0%} |" for r in rows
        ]
        md.append("")
    md += [f"- **Answerability**: {t(answerability_text(card))}."]
    d = card.duplicates
    md.append(f"- **Duplicates removed**: {d.removed} (same text, or same expected sources and cosine ≥ {d.threshold:.2f}).")
    n = card.nonSpecific
    md.append(f"- **Non-specific**: {n.flagged} flagged, {n.widened} widened, {n.dropped} dropped.")
    md += [f"- **Spread warning**: {t(w)}" for w in s.warnings]
    md.append("")
    if card.dropped:
        md += ["| dropped query | check | reason |", "|---|---|---|"]
        md += [f"| {t(q.id)}: {t(q.query)} | {t(q.check)} | {t(q.reason[:300])} |" for q in card.dropped]
    else:
        md.append("No query was dropped.")
    md.append("")
    return md
