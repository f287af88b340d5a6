"""Phase one's query-set checks one by one, each with more members of its kind than the scripted run of
tests/querygen/test_query_sets.py: allocation with a floor, near-duplicates by embedding, non-specific queries
widened or dropped (headings and BM25 ties), leakage against the corpus background, spread warnings,
the answerability check when a judge call fails, language detection, and the offline writer's spread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from judge_runner.core.models import Query
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.judging.protocol import LabelReply
from judge_runner.llm.errors import BudgetExhausted, TransientError
from judge_runner.querygen.answerability import check_answerability
from judge_runner.querygen.card import card_lines
from judge_runner.querygen.checks import (
    INTENT_COPY_LIMIT,
    CorpusBM25,
    find_duplicates,
    measure_intent,
    measure_leakage,
    non_specific,
    resolve_non_specific,
)
from judge_runner.querygen.contrast import contrast
from judge_runner.querygen.heuristic import HeuristicQueryWriter, propose_queries
from judge_runner.querygen.profile import NO_LANGUAGE, detect_language, profile_corpus
from judge_runner.querygen.protocol import GenerationResult
from judge_runner.querygen.review import ReviewOptions, review_query_set
from judge_runner.querygen.spread import allocate, measure_spread

pytestmark = pytest.mark.hash_embedder


def q(qid: str, text: str, sources: list[str], kind: str = "natural-language") -> Query:
    return Query(id=qid, query=text, queryIntent=f"Wants: {text}", queryType=kind, expectedSources=sources)


def corpus(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


# -- allocation ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("counts", "slots", "expected"),
    [
        ({"til": 510, "awesome-compose": 142, "(root)": 1}, 23, {"til": 17, "awesome-compose": 5, "(root)": 1}),
        ({"big": 90, "small": 10}, 10, {"big": 9, "small": 1}),
        ({"big": 99, "tiny": 1}, 10, {"big": 9, "tiny": 1}),  # the floor: a folder with files gets one
        ({"a": 5, "b": 4, "c": 3}, 2, {"a": 1, "b": 1, "c": 0}),  # too few slots for every floor: largest first
        ({"a": 1, "b": 1}, 5, {"a": 3, "b": 2}),
        ({"a": 3, "empty": 0}, 4, {"a": 4, "empty": 0}),
    ],
)
def test_allocate_is_proportional_with_a_floor(counts, slots, expected):
    got = allocate(counts, slots)
    assert got == expected and sum(got.values()) == slots


# -- distinct -----------------------------------------------------------------------------------------------
def test_near_duplicates_by_embedding_keep_the_first():
    embedder = HashEmbedder()
    a = q("q01", "how do I rotate the backup key for postgres", ["runbooks/backup.md"])
    b = q("q02", "how do i rotate the postgres backup key", ["runbooks/backup.md"])  # cosine 0.95 with the hash embedder
    other_source = q("q03", "how do i rotate the postgres backup key", ["runbooks/keys.md"])
    related = q("q04", "how do I rotate the backup key for mysql", ["runbooks/backup.md"])  # cosine 0.79: another question
    kept, found = find_duplicates([a, b, other_source, related], embedder)
    assert [x.id for x in kept] == ["q01", "q03", "q04"]
    [dup] = found
    assert (dup.kept.id, dup.dropped.id, dup.same_text) == ("q01", "q02", False) and dup.cosine >= 0.9
    # the same text after normalisation is a duplicate whatever its sources
    kept, found = find_duplicates([a, q("q05", "How do I rotate the BACKUP key for Postgres?!", ["x.md"])], embedder)
    assert [x.id for x in kept] == ["q01"] and found[0].same_text and found[0].cosine is None


# -- specific -----------------------------------------------------------------------------------------------
@pytest.fixture
def compose_kb(tmp_path):
    files = {f"apps/app{i}/README.md": f"# App {i}\n\n## Deploy with docker compose\n\nRun the stack of app{i}.\n" for i in range(8)}
    files |= {f"small/s{i}/README.md": f"# Small {i}\n\n## Expected result\n\nThe page of small {i} opens.\n" for i in range(4)}
    files |= {f"stacks/st{i}/compose.yaml": f"services:\n  web{i}:\n    image: nginx\nnetworks:\n  front: {{}}\n" for i in range(6)}
    files["notes/counter.md"] = "# Keep a tally\n\nUse collections.Counter to count how often each word occurs.\n"
    return profile_corpus(corpus(tmp_path / "kb", files))


def test_a_heading_of_many_files_is_dropped_and_of_a_few_widened(compose_kb):
    bm25 = CorpusBM25(compose_kb)
    many = q("q1", "Deploy with docker compose", ["apps/app0/README.md"])
    finding = non_specific(many, compose_kb, bm25)
    assert finding is not None and "heading of 8 files" in finding.why and len(finding.rivals) == 7
    widened, entry = resolve_non_specific(many, finding)
    assert widened is None and entry.action == "dropped"
    few = q("q2", "expected result", ["small/s0/README.md"])  # a heading of 4 files: 3 rivals
    finding = non_specific(few, compose_kb, bm25)
    widened, entry = resolve_non_specific(few, finding)
    assert entry.action == "widened" and widened is not None
    assert widened.expectedSources == ["small/s0/README.md", "small/s1/README.md", "small/s2/README.md", "small/s3/README.md"]
    # an ambiguous query may have many answers: never flagged
    assert non_specific(q("q3", "Deploy with docker compose", ["apps/app0/README.md"], "ambiguous"), compose_kb, bm25) is None


def test_bm25_ties_make_a_query_non_specific_but_not_a_query_in_the_users_words(compose_kb):
    bm25 = CorpusBM25(compose_kb)
    key = q("q1", "networks", ["stacks/st0/compose.yaml"], "identifier")  # six compose files hold it equally
    finding = non_specific(key, compose_kb, bm25)
    assert finding is not None and "BM25 cannot separate" in finding.why and len(finding.rivals) == 5
    specific = q("q2", "collections.Counter tally", ["notes/counter.md"], "keyword")
    assert non_specific(specific, compose_kb, bm25) is None
    # the user's own words: the source holds few of them, so BM25 says nothing about specificity
    paraphrase = q("q3", "which container setups share a network between services", ["stacks/st0/compose.yaml"])
    assert non_specific(paraphrase, compose_kb, bm25) is None
    bm25.close()


# -- leakage ------------------------------------------------------------------------------------------------
def test_leakage_of_copies_paraphrases_and_words_no_file_holds(compose_kb):
    copy = measure_leakage(q("q1", "Keep a tally", ["notes/counter.md"]), compose_kb)
    assert copy.heading_copy and copy.value == 1.0 and copy.background is not None and copy.background < 0.2
    words = measure_leakage(q("q2", "count each word with collections counter", ["notes/counter.md"]), compose_kb)
    assert not words.heading_copy and words.value == 1.0  # every word is the document's, though no heading
    own = measure_leakage(q("q3", "histogram of vocabulary frequencies", ["notes/counter.md"]), compose_kb)
    assert own.value == 0.0  # none of the document's words
    mixed = measure_leakage(q("q4", "tally of vocabulary frequencies", ["notes/counter.md"]), compose_kb)
    assert 0 < mixed.value < 0.5
    # a word every compose file holds leaks little against the background: its idf is low
    common = measure_leakage(q("q5", "nginx tally", ["stacks/st0/compose.yaml"]), compose_kb)
    assert common.background > 0 and common.value < 0.5
    assert measure_leakage(q("q6", "bread", [], "off-topic"), compose_kb).value is None


# -- spread -------------------------------------------------------------------------------------------------
def intent(text: str, query: str = "count words") -> Query:
    return Query(id="q1", query=query, queryIntent=text, queryType="conceptual", expectedSources=["notes/counter.md"])


def test_the_intent_is_measured_like_the_query_and_flagged_when_it_restates_or_names_its_source(compose_kb):
    own = measure_intent(intent("Wants a way to get how frequent every term is in a text."), compose_kb)
    assert own.copied == 0 and not own.names_source and not own.over_limit and own.value is not None
    restated = measure_intent(intent("Use collections.Counter to count how often each word occurs, as the note says."), compose_kb)
    assert restated.copied > INTENT_COPY_LIMIT and restated.over_limit
    assert restated.value > own.value  # its words are the source's
    named = measure_intent(intent("Find what notes/counter.md says about counting."), compose_kb)
    assert named.names_source and named.over_limit
    # quoting the query is not copying the source: the judge is shown the query anyway
    quoted = measure_intent(intent("Find the section “Keep a tally” and what it says.", "Keep a tally"), compose_kb)
    assert not quoted.over_limit
    assert measure_intent(q("q6", "bread", [], "off-topic"), compose_kb).copied is None


def test_the_card_counts_and_flags_the_intents_over_the_limit(compose_kb):
    queries = [
        intent("Wants a way to get how frequent every term is in a text."),
        Query(
            id="q2",
            query="tally words",
            queryIntent="Use collections.Counter to count how often each word occurs.",
            queryType="conceptual",
            expectedSources=["notes/counter.md"],
        ),
    ]
    result = review_query_set(
        GenerationResult(queries, 2, [], "scripted", 0.0, 0), compose_kb, None, embedder=HashEmbedder(), options=ReviewOptions()
    )
    card = result.card
    facts = {f.id: f for f in card.queries}
    assert "intent-copies-source" in facts["q2"].flags and "intent-copies-source" not in facts["q1"].flags
    assert facts["q2"].intentCopied > card.intentCopyLimit == INTENT_COPY_LIMIT
    assert sum(t.intentsOverLimit for t in card.leakage) == 1
    said = " ".join(" ".join(card_lines(card)).split())
    assert "1 intent(s) copy their expected source beyond 25% of their 5-grams or name it (flagged: q2)" in said
    assert [q.id for q in result.queries] == ["q1", "q2"]  # flagged, not dropped: the judge is told the intent is no one file


def test_spread_warns_when_a_big_folder_gets_too_few_queries(tmp_path):
    files = {f"big/b{i}.md": f"# Big {i}\n\nText about topic {i}.\n" for i in range(18)}
    files |= {f"small/s{i}.md": f"# Small {i}\n\nText.\n" for i in range(2)}
    profile = profile_corpus(corpus(tmp_path / "kb", files))
    lopsided = [q(f"q{i}", f"small {i}", [f"small/s{i % 2}.md"]) for i in range(9)] + [q("q9", "big", ["big/b0.md"])]
    spread = measure_spread(lopsided, profile)
    assert spread.onTopicQueries == 10 and {r.name: r.queries for r in spread.folders} == {"big": 1, "small": 9}
    assert any(w.startswith("big/ holds 90% of the files but gets 10% (1 of 10)") for w in spread.warnings)
    assert any(w.startswith("small/ holds 10% of the files but gets 90%") for w in spread.warnings)
    balanced = [q(f"q{i}", f"big {i}", [f"big/b{i}.md"]) for i in range(9)] + [q("q9", "small", ["small/s0.md"])]
    assert measure_spread(balanced, profile).warnings == []
    assert measure_spread(lopsided[:5], profile).warnings == []  # too few queries to compare


def test_the_offline_writer_gives_a_small_folder_its_floor_and_spreads_inside_a_big_one(tmp_path):
    files = {
        f"big/area{i % 6}/doc{i}.md": f"# Topic {i}\n\n## Setting up widget {i}\n\nConfigure widget{i} with flag{i}.\n" for i in range(40)
    }
    files |= {f"small/s{i}.md": f"# Small {i}\n\n## Rotating gadget {i}\n\nRotate gadget{i} monthly.\n" for i in range(2)}
    files["README.md"] = "# Readme\n\n## Layout of this tree\n\nWhere things live.\n"
    root = corpus(tmp_path / "kb", files)
    data = propose_queries(root, 10)
    firsts = [x["expectedSources"][0] for x in data["queries"] if x["queryType"] != "off-topic"]
    folders = [s.split("/")[0] if "/" in s else "(root)" for s in firsts]
    assert len(data["queries"]) == 10 and folders.count("small") >= 1 and folders.count("big") >= 5
    assert len({s.split("/")[1] for s in firsts if s.startswith("big/")}) >= 4  # several subfolders of big/
    assert firsts != sorted(firsts)  # not taken in path order


def test_the_offline_writer_spreads_the_sample_fixtures_over_their_folders(fixtures_root):
    result = HeuristicQueryWriter().write_queries(fixtures_root, 15)
    folders = {q.expectedSources[0].split("/")[0] for q in result.queries if q.expectedSources}
    assert len(folders) >= 8
    assert all("ignore previous instructions" not in q.query.lower() for q in result.queries)  # an injected heading is no query


# -- answerability ------------------------------------------------------------------------------------------
class FailingJudge:
    """A judge whose label call fails for one query (a transient error after the retries), as an LLM can."""

    name, model, heuristic = "test", "m", False

    def __init__(self, failing: str):
        self.failing = failing
        self.calls = 0

    def label_one(self, query, intent, document, sampling, log=lambda m: None):
        self.calls += 1
        if query == self.failing:
            raise TransientError("the server kept answering 529")
        return LabelReply(label=3 if "backup" in document.body else 0, reason="grades by the word backup")


def test_a_failed_judge_call_leaves_the_query_unchecked_and_kept(tmp_path):
    root = corpus(tmp_path / "kb", {"backup.md": "# Backup\n\nRotate the backup key.\n", "dns.md": "# DNS\n\nTickets.\n"})
    queries = [q("q1", "rotate the backup key", ["backup.md"]), q("q2", "dns tickets", ["dns.md"]), q("q3", "dns again", ["dns.md"])]
    judge = FailingJudge("dns tickets")
    checks, tally = check_answerability(queries, root, judge)
    assert [c.verified for c in checks] == [True, False, False] and checks[1].error and "TransientError" in checks[1].error
    assert tally.calls == 2 and judge.calls == 3  # the failed call is not counted as made
    reviewed = review_query_set(GenerationResult(queries, 3), profile_corpus(root), judge, embedder=HashEmbedder())
    assert [x.id for x in reviewed.queries] == ["q1", "q2"]  # q2 unchecked (kept), q3 labelled 0 (dropped)
    card = reviewed.card
    assert card.answerability.unchecked == 1 and card.answerability.dropped == 1 and card.answerability.verified == 1
    assert {f.id: f.flags for f in card.queries} == {"q1": [], "q2": ["unchecked"]}
    kept = review_query_set(
        GenerationResult(queries, 3),
        profile_corpus(root),
        FailingJudge("-"),
        options=ReviewOptions(keep_unverified=True),
        embedder=HashEmbedder(),
    )
    assert [x.id for x in kept.queries] == ["q1", "q2", "q3"] and kept.card.answerability.flagged == 2


class BrokeJudge(FailingJudge):
    """A judge whose budget runs out at its second call."""

    def label_one(self, query, intent, document, sampling, log=lambda m: None):
        self.calls += 1
        if self.calls == 2:
            raise BudgetExhausted("the next call could take the run past --max-budget-usd 0.01")
        return LabelReply(label=3, reason="fine")


def test_a_spent_budget_stops_the_check_instead_of_leaving_queries_unchecked(tmp_path):
    root = corpus(tmp_path / "kb", {"backup.md": "# Backup\n\nRotate the backup key.\n", "dns.md": "# DNS\n\nTickets.\n"})
    queries = [q("q1", "rotate the backup key", ["backup.md"]), q("q2", "dns tickets", ["dns.md"])]
    with pytest.raises(BudgetExhausted):
        check_answerability(queries, root, BrokeJudge("-"))


def test_without_a_judge_the_card_says_answerability_was_not_checked(tmp_path):
    root = corpus(tmp_path / "kb", {"backup.md": "# Backup\n\nRotate the backup key.\n"})
    reviewed = review_query_set(
        GenerationResult([q("q1", "rotate key", ["backup.md"])], 1), profile_corpus(root), None, embedder=HashEmbedder()
    )
    assert reviewed.card.answerability is None and [x.id for x in reviewed.queries] == ["q1"]


# -- languages ----------------------------------------------------------------------------------------------
def test_languages_come_from_the_prose_of_text_files_only(fixtures_root):
    profile = profile_corpus(fixtures_root)
    languages = {s: f.language for s, f in profile.files.items()}
    assert languages["i18n/de/rufbereitschaft-regeln.md"] == "de" and languages["i18n/fr/revue-de-code.md"] == "fr"
    assert languages["i18n/ja/backup-procedure.md"] == "ja" and languages["runbooks/redis-cache-failover.md"] == "en"
    assert languages["config/logging.yaml"] == NO_LANGUAGE and languages["scripts/rotate_logs.py"] == NO_LANGUAGE
    assert "By language" in profile.outline() and "- de: 2 files" in profile.outline()


SHORT_ENGLISH_NOTES = {
    # read as Latin (0.996) and German (0.964) by py3langid: terse English with borrowed words
    "notes/agenda.md": "Agenda: status quo, ad hoc fixes, data retention per tenant, index rebuild via cron, alias records, "
    "minimum versus maximum replicas, etc.\n",
    "notes/offsite.md": "Berlin offsite: Hotel Adlon, Zimmer booked, Anreise Montag, Abendessen Dienstag at Lorenz Adlon "
    "Esszimmer, Rückfahrt Mittwoch, Kosten via Spesen tool.\n",
    "notes/etcd.md": "Memo re: quorum, consensus, etcd members, raft terms, leader election, data directory, snapshot "
    "interval, compaction per revision.\n",
    "notes/wifi.md": "Berlin office wifi: SSID Gast, Passwort rotates monthly, VLAN 20, DHCP via Fritz box, printer Kyocera "
    "on floor 2, contact Stefan for access.\n",
    "notes/helm.md": "Helm values: replicas 3, image tag stable, ingress host intern, resources limits memory 512Mi, env "
    "LOG_LEVEL info, probe liveness path health.\n",
    "notes/standup.md": "Standup: deploy blocked by flaky integration tests; Tom investigating; release candidate moved to "
    "Thursday; docs pending review.\n",
    "notes/grafana.md": "Grafana dashboards: latency p99 panel, error rate panel, saturation panel, traffic panel; alerts "
    "routed to ops channel via webhook.\n",
    "notes/oncall.md": "Notes: Anna, Lena, Jonas, Lukas, Felix on call rotation; swap Friday; handover via Slack; runbook "
    "link in pinned message; pager duty schedule.\n",
    "notes/sprint.md": "Sprint review: velocity stable, carry over two stories, demo ingest pipeline, retro action items, "
    "backlog grooming, estimates in story points.\n",
}


def test_short_english_notes_are_never_told_another_language_nor_typed_multilingual(tmp_path):
    root = corpus(tmp_path / "kb", SHORT_ENGLISH_NOTES)
    profile = profile_corpus(root)
    languages = {s: f.language for s, f in profile.files.items()}
    assert set(languages.values()) <= {"en", NO_LANGUAGE}, languages
    assert languages["notes/agenda.md"] == NO_LANGUAGE and languages["notes/offsite.md"] == NO_LANGUAGE  # too short to trust
    queries = propose_queries(root, 9, profile=profile)["queries"]
    assert [x["query"] for x in queries if x["queryType"] == "multilingual"] == []


def test_long_enough_prose_is_told_and_its_halves_must_agree():
    german = (
        "Die Rufbereitschaft beginnt am Montag um neun Uhr und endet am folgenden Montag. Wer Bereitschaft hat, "
        "muss innerhalb von fünfzehn Minuten erreichbar sein und das Notebook dabei haben. Bei einem Ausfall der "
        "Suche wird zuerst das Runbook gelesen, dann der Dienst neu gestartet und das Team informiert. "
    )
    assert detect_language(german * 2, "md") == "de"
    assert detect_language(german[:300], "md") == NO_LANGUAGE  # Latin script under 400 characters: unknown
    english = "The search service is restarted by the on-call engineer when the health check fails twice in a row. " * 3
    assert detect_language(english + german, "md") == NO_LANGUAGE  # one half English, the other German: unknown
    assert detect_language(english * 2, "md") == "en"
    japanese = "バックアップは毎日午前二時に実行されます。失敗した場合は担当者に連絡してください。復元手順は別の文書にあります。" * 3
    assert detect_language(japanese, "md") == "ja"  # another script: 120 characters are enough


def test_a_file_of_unknown_language_never_makes_a_multilingual_query(tmp_path):
    files = {f"notes/n{i}.md": f"# Note {i}\n\nShort note {i} about the pager rotation.\n" for i in range(6)}
    root = corpus(tmp_path / "kb", files)
    profile = profile_corpus(root)
    assert {f.language for f in profile.files.values()} == {NO_LANGUAGE}
    assert all(x["queryType"] != "multilingual" for x in propose_queries(root, 6, profile=profile)["queries"])


# -- distinct: what keeps two close queries apart ----------------------------------------------
class SameVector:
    """An embedder that puts every text on one vector (cosine 1.0): only the words can keep two queries apart."""

    dimension = 4

    def encode(self, texts, **_):
        return np.tile(np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32), (len(texts), 1))


KEPT_APART = [
    # numbers: versions, ports, sizes, identifiers' numbers
    ("upgrade postgres 14 to 15", "upgrade postgres 15 to 16"),
    ("upgrade postgres 14 to 15", "downgrade postgres 15 to 14"),
    ("expose the app on port 8080", "expose the app on port 8443"),
    ("set the heap to 512 MB", "set the heap to 2048 MB"),
    ("python 3.11 install", "python 3.12 install"),
    ("what did DEC-0051 decide", "what did DEC-0052 decide"),
    ("restart nginx", "restart nginx 2 times"),
    # negation
    ("why does the backup job run", "why does the backup job not run"),
    ("deploy with downtime", "deploy without downtime"),
    ("the cron job can run twice", "the cron job can't run twice"),
    ("cache hits are logged", "cache hits are never logged"),
    # opposite words, on their stems
    ("increase the connection pool size", "decrease the connection pool size"),
    ("increasing the connection pool size", "decreased connection pool size"),
    ("enable TLS on the ingress", "disable TLS on the ingress"),
    ("start the worker on boot", "stop the worker on boot"),
    ("allow traffic from the office VPN", "deny traffic from the office VPN"),
    ("maximum upload size", "minimum upload size"),
    ("scale the deployment up", "scale the deployment down"),
    ("install the agent on debian", "uninstall the agent on debian"),
    ("connect to the replica", "disconnect from the replica"),
    ("activate the feature flag", "deactivate the feature flag"),
    ("a valid token is refused", "an invalid token is refused"),
    # direction
    ("migrate the data from mysql to postgres", "migrate the data from postgres to mysql"),
    # identifiers
    ("what does SIGTERM do to the worker", "what does SIGKILL do to the worker"),
    ("tune max_connections for the pool", "tune max_wal_senders for the pool"),
    ("call getUserById from the handler", "call getUserByName from the handler"),
]

STILL_DUPLICATES = [
    ("how do I rotate the backup key", "how do i rotate backup keys"),
    ("increase the connection pool size", "how to increase the size of the connection pool"),
    ("upgrade postgres 14 to 15", "how do I upgrade postgres from 14 to 15"),
    ("set pool_size in the config", "set the pool size in the config"),
    ("what did DEC-0051 decide", "what was decided in DEC-0051"),
    ("migrate from mysql to postgres", "migrating from mysql to postgres"),
    ("why does the job not start", "why doesn't the job start"),
    ("upgrade PostgreSQL", "upgrade postgres"),
]


@pytest.mark.parametrize(("first", "second"), KEPT_APART)
def test_queries_that_differ_in_numbers_negation_opposites_direction_or_identifiers_are_kept_apart(first, second):
    a, b = q("q01", first, ["ops/pool.md"]), q("q02", second, ["ops/pool.md"])
    for pair in ([a, b], [b, a]):  # either may come first
        kept, found = find_duplicates(pair, SameVector())
        assert len(kept) == 2 and found == [], (first, second)
    assert contrast(first, second) is not None and contrast(second, first) is not None


@pytest.mark.parametrize(("first", "second"), STILL_DUPLICATES)
def test_paraphrases_are_still_duplicates(first, second):
    kept, found = find_duplicates([q("q01", first, ["ops/pool.md"]), q("q02", second, ["ops/pool.md"])], SameVector())
    assert [x.id for x in kept] == ["q01"] and found[0].cosine == pytest.approx(1.0), contrast(first, second)


def test_a_query_kept_apart_from_one_is_still_a_duplicate_of_another():
    queries = [
        q("q01", "increase the connection pool size", ["ops/pool.md"]),
        q("q02", "decrease the connection pool size", ["ops/pool.md"]),
        q("q03", "how to decrease the size of the connection pool", ["ops/pool.md"]),
    ]
    kept, found = find_duplicates(queries, SameVector())
    assert [x.id for x in kept] == ["q01", "q02"]
    assert [(d.kept.id, d.dropped.id) for d in found] == [("q02", "q03")]
